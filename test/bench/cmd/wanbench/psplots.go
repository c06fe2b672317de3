package main

import (
	"fmt"
	"image/color"
	"maps"
	"math"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// barPanel is one panel of paired bars: for each name, a value and a
// second value beside it (a bound, or the degraded p50), and a third if c
// is set (a second bound).
type barPanel struct {
	title            string
	names            []string
	a, b, c          []float64
	aLab, bLab, cLab string
	yLab             string
}

// drawPanels draws the panels two to a row.
func drawPanels(path string, panels []barPanel) error {
	cols := min(2, len(panels))
	rows := (len(panels) + cols - 1) / cols
	const pw, ph = 6 * vg.Inch, 3.8 * vg.Inch
	img := vgimg.New(pw*vg.Length(cols), ph*vg.Length(rows))
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	for i, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.title
		p.Y.Label.Text = pn.yLab
		p.Add(plotter.NewGrid())
		grid[i/cols][i%cols] = p
		if len(pn.names) == 0 {
			continue
		}
		w := vg.Points(12)
		// Two bars sit either side of the name, three at -w, 0 and w.
		offA, offB := -w/2, w/2
		if len(pn.c) > 0 {
			offA, offB = -w, 0
		}
		a, err := plotter.NewBarChart(plotter.Values(pn.a), w)
		if err != nil {
			return err
		}
		a.Color, a.Offset = palette[0], offA
		a.LineStyle.Width = 0
		b, err := plotter.NewBarChart(plotter.Values(pn.b), w)
		if err != nil {
			return err
		}
		b.Color, b.Offset = color.RGBA{170, 170, 170, 255}, offB
		b.LineStyle.Width = 0
		p.Add(a, b)
		top := math.Max(slices.Max(pn.a), slices.Max(pn.b))
		p.Legend.Add(pn.aLab, a)
		p.Legend.Add(pn.bLab, b)
		if len(pn.c) > 0 {
			c, err := plotter.NewBarChart(plotter.Values(pn.c), w)
			if err != nil {
				return err
			}
			c.Color, c.Offset = color.RGBA{215, 215, 215, 255}, w
			c.LineStyle.Width = 0
			p.Add(c)
			p.Legend.Add(pn.cLab, c)
			top = math.Max(top, slices.Max(pn.c))
		}
		p.Y.Min, p.Y.Max = 0, math.Max(1, top*1.25)
		p.Legend.Top, p.Legend.Left = true, true
		p.NominalX(pn.names...)
		p.X.Tick.Label.Rotation = math.Pi / 6
		p.X.Tick.Label.XAlign = draw.XRight
		p.X.Tick.Label.YAlign = draw.YCenter
	}
	for i := len(panels); i < rows*cols; i++ {
		grid[i/cols][i%cols] = plot.New()
		grid[i/cols][i%cols].HideAxes()
	}
	canvases := plot.Align(grid, draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}, draw.New(img))
	for i := range grid {
		for j := range grid[i] {
			grid[i][j].Draw(canvases[i][j])
		}
	}
	return savePNG(path, img)
}

func nonNeg(v float64) float64 { return math.Max(v, 0) }

// writePSPlots draws what res measured and returns the files written.
func writePSPlots(dir string, res *psResults) ([]string, error) {
	var files []string
	save := func(name string, err error) error {
		if err == nil {
			files = append(files, name)
		}
		return err
	}

	var panels []barPanel
	for _, s := range res.Sites {
		pn := barPanel{title: "publish-ack p50 vs bound, publisher in " + s, aLab: "p50", bLab: "bound", yLab: "ms"}
		for _, r := range res.Rows {
			if r.Phase == psPublish && r.Region == s && r.measured() {
				pn.names, pn.a, pn.b = append(pn.names, r.label()), append(pn.a, r.P50ms), append(pn.b, nonNeg(r.BoundMs))
			}
		}
		if len(pn.names) > 0 {
			panels = append(panels, pn)
		}
	}
	if len(panels) > 0 {
		if err := save(psPublishPlot, drawPanels(filepath.Join(dir, psPublishPlot), panels)); err != nil {
			return nil, err
		}
	}
	for _, s := range res.Sites {
		name := psCDFFile(s)
		ok, err := drawCDF(filepath.Join(dir, name), "Publish-ack latency from "+s+" ("+res.Topology+")", res.Rows, func(r *psRow) bool { return r.Phase == psPublish && r.Region == s })
		if err != nil {
			return nil, err
		}
		if ok {
			files = append(files, name)
		}
	}

	panels = nil
	for _, a := range res.Sites {
		for _, c := range res.Sites {
			pn := barPanel{title: "delivery p50 vs bound, " + a + " → " + c, aLab: "p50", bLab: "bound", yLab: "ms"}
			for _, r := range res.Rows {
				if r.Phase == psDelivery && r.Region == a && r.To == c && r.measured() {
					pn.names, pn.a, pn.b = append(pn.names, r.label()), append(pn.a, r.P50ms), append(pn.b, nonNeg(r.BoundMs))
				}
			}
			if len(pn.names) > 0 {
				panels = append(panels, pn)
			}
		}
	}
	if len(panels) > 0 {
		if err := save(psDeliveryPlot, drawPanels(filepath.Join(dir, psDeliveryPlot), panels)); err != nil {
			return nil, err
		}
	}

	panels = nil
	for _, s := range res.Subscribers {
		pn := barPanel{title: "degraded link: publish-ack p50 from " + s, aLab: "healthy", bLab: "degraded", yLab: "ms"}
		for _, r := range res.Rows {
			if r.Phase != psDegraded || r.Region != s || r.Condition != condHealthy || !r.measured() {
				continue
			}
			d := res.find(psDegraded, r.System, r.Predicate, r.Region, "", r.Leader, condDegraded, 0)
			if d == nil || !d.measured() {
				continue
			}
			name := r.label()
			if r.System == sysNATS {
				name = r.Predicate + ", " + name
			}
			pn.names, pn.a, pn.b = append(pn.names, name), append(pn.a, r.P50ms), append(pn.b, d.P50ms)
		}
		if len(pn.names) > 0 {
			panels = append(panels, pn)
		}
	}
	if len(panels) > 0 {
		if err := save(psDegradedPlot, drawPanels(filepath.Join(dir, psDegradedPlot), panels)); err != nil {
			return nil, err
		}
	}

	panels = nil
	var inflights []int
	for _, r := range res.Rows {
		if r.Phase == psTput && r.measured() && !slices.Contains(inflights, r.InFlight) {
			inflights = append(inflights, r.InFlight)
		}
	}
	slices.Sort(inflights)
	for _, n := range inflights {
		pn := barPanel{title: fmt.Sprintf("loopback, %d in flight", n), aLab: "publishes/s", bLab: "delivered/s, slowest subscriber", yLab: "messages/s"}
		for _, r := range res.Rows {
			if r.Phase == psTput && r.InFlight == n && r.measured() {
				slowest := 0.0
				if len(r.DeliveredPerS) > 0 {
					slowest = slices.Min(slices.Collect(maps.Values(r.DeliveredPerS)))
				}
				pn.names, pn.a, pn.b = append(pn.names, r.System), append(pn.a, r.OpsPerS), append(pn.b, slowest)
			}
		}
		panels = append(panels, pn)
	}
	if len(panels) > 0 {
		if err := save(psTputPlot, drawPanels(filepath.Join(dir, psTputPlot), panels)); err != nil {
			return nil, err
		}
	}

	ok, err := drawRSS(filepath.Join(dir, psMemoryPlot), res)
	if err != nil {
		return nil, err
	}
	if ok {
		files = append(files, psMemoryPlot)
	}
	return files, nil
}

// drawCDF draws the latency CDF of every row keep selects; false if none
// has latencies.
func drawCDF(path, title string, rows []*psRow, keep func(*psRow) bool) (bool, error) {
	var sel []*psRow
	maxMs := 0.0
	for _, r := range rows {
		if keep(r) && len(r.lat) > 0 {
			sel = append(sel, r)
			maxMs = math.Max(maxMs, ms(slices.Max(r.lat)))
		}
	}
	if len(sel) == 0 {
		return false, nil
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "latency (ms)"
	p.Y.Label.Text = "fraction of publishes"
	p.Y.Min, p.Y.Max = 0, 1
	p.X.Min, p.X.Max = 0, maxMs*1.6
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, false
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	for i, r := range sel {
		s := slices.Clone(r.lat)
		slices.Sort(s)
		xy := plotter.XYs{{X: ms(s[0]), Y: 0}}
		for j, d := range s {
			xy = append(xy, plotter.XY{X: ms(d), Y: float64(j+1) / float64(len(s))})
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return false, err
		}
		l.Color = palette[i%len(palette)]
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (p50 %.0f ms)", r.label(), r.P50ms), l)
	}
	return true, p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}

// drawRSS draws every memory row's RSS over time, the stalls marked;
// false if there is none.
func drawRSS(path string, res *psResults) (bool, error) {
	p := plot.New()
	p.Title.Text = "RSS per site while a durable subscriber stops acking"
	p.X.Label.Text = "seconds since publishing began"
	p.Y.Label.Text = "RSS (MiB)"
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	top, n := 0.0, 0
	var stalls [][2]float64
	for _, r := range res.Rows {
		if r.Phase != psMemory || !r.measured() || len(r.RSS) == 0 {
			continue
		}
		xy := make(plotter.XYs, 0, len(r.RSS))
		for _, pt := range r.RSS {
			xy = append(xy, plotter.XY{X: pt.T, Y: pt.MiB})
			top = math.Max(top, pt.MiB)
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return false, err
		}
		l.Color = palette[n%len(palette)]
		l.Width = vg.Points(1.5)
		if r.System == sysNATS {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(r.System+" "+r.Region, l)
		n++
		if s := [2]float64{r.StallFromS, r.StallToS}; !slices.Contains(stalls, s) {
			stalls = append(stalls, s)
		}
	}
	if n == 0 {
		return false, nil
	}
	for _, s := range stalls {
		for _, x := range s {
			l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: top * 1.1}})
			if err != nil {
				return false, err
			}
			l.Color = color.RGBA{200, 60, 60, 255}
			l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
			p.Add(l)
		}
	}
	p.Y.Min, p.Y.Max = 0, top*1.15
	return true, p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}
