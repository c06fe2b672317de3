package site

import (
	"strings"
	"testing"

	"github.com/stabilizer/stabilizer/stabilizer"
)

func TestStatusPageRenders(t *testing.T) {
	v := statusView{Site: "us-east-1", Sites: []string{"us-east-1", "eu-west-1"}, Connected: map[string]bool{"eu-west-1": true},
		Uptime: "4s", Disk: stabilizer.DiskStatus{Dir: "/data", Free: 43200000, Reserve: 256 << 20, Full: true}, Preds: []predView{{"majority", "majority(persisted(sites))"}},
		Streams: []streamView{{Origin: "us-east-1", Stream: "kv", Head: 5, Persisted: 5,
			Levels:    []levelRow{{"persisted", []uint64{5, 3}}},
			Frontiers: []frontierView{{Predicate: "majority", Seq: 5, Version: 1}, {Predicate: "all", Seq: 3, Version: 1, Behind: 2}}}},
		Topics: []topicView{{Name: "jobs.events", PublishAck: "audience", Delivery: "majority", Stored: 12,
			Audience: []string{"us-east-1", "eu-west-1"}, Subs: []subView{{Name: "dash", Site: "eu-west-1", Consumers: 2, Unacked: 7}}}}}
	var b strings.Builder
	if err := page.Execute(&b, v); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Stabilizer <span>·</span> us-east-1", "connected", "us-east-1/kv — head 5", `<td class="num below">3</td>`, "majority(persisted(sites))",
		"jobs.events — 12 messages stored here",
		"Disk: 41.2 MiB free under /data, reserve 256.0 MiB: <span class=down>FULL</span>", "<td class=l><b>dash</b> <span class=mute>at eu-west-1</span></td>", `<td class="num behind">7</td>`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestDiskLine(t *testing.T) {
	for _, c := range []struct {
		st   stabilizer.DiskStatus
		want string
	}{
		{stabilizer.DiskStatus{Dir: "/d", Free: 300 << 30, Reserve: 256 << 20}, "Disk: 300.0 GiB free under /d, reserve 256.0 MiB.</p>"},
		{stabilizer.DiskStatus{Dir: "/d", Free: 5 << 20}, "Disk: 5.0 MiB free under /d, reserve off.</p>"},
	} {
		var b strings.Builder
		if err := page.Execute(&b, statusView{Site: "a", Disk: c.st}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), c.want) {
			t.Errorf("%+v: page lacks %q", c.st, c.want)
		}
	}
}
