package stabilizer

import "testing"

func TestNextFull(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name          string
		full          bool
		free, reserve int64
		want          bool
	}{
		{"off", false, 0, 0, false},
		{"off while full", true, 0, 0, false},
		{"above the reserve", false, 300 * mib, 256 * mib, false},
		{"at the reserve", false, 256 * mib, 256 * mib, false},
		{"below the reserve", false, 256*mib - 1, 256 * mib, true},
		// A full site with a 256 MiB reserve waits for 256 + 64 MiB.
		{"full, back above the reserve", true, 300 * mib, 256 * mib, true},
		{"full, at the reserve and slack", true, 320 * mib, 256 * mib, true},
		{"full, past the reserve and slack", true, 320*mib + 1, 256 * mib, false},
		// A 32 MiB reserve: the slack is 16 MiB, not a quarter.
		{"small reserve, within the slack", true, 48 * mib, 32 * mib, true},
		{"small reserve, past the slack", true, 48*mib + 1, 32 * mib, false},
		// A 4 MiB reserve: the slack is capped at the reserve.
		{"tiny reserve, past the slack", true, 8*mib + 1, 4 * mib, false},
	} {
		if got := nextFull(c.full, c.free, c.reserve); got != c.want {
			t.Errorf("%s: nextFull(%v, %d, %d) = %v, want %v", c.name, c.full, c.free, c.reserve, got, c.want)
		}
	}
}

func TestReserve(t *testing.T) {
	const mib, gib = 1 << 20, 1 << 30
	for _, c := range []struct {
		min, size, want int64
	}{
		{0, 100 * gib, DefaultMinFreeBytes},
		{0, 96 * mib, 96 * mib / 20}, // 5% of a small filesystem
		{-1, 100 * gib, 0},
		{10 * mib, 96 * mib, 10 * mib}, // set: taken as it is
		{10 * gib, 96 * mib, 10 * gib},
	} {
		g := &diskGuard{min: c.min}
		if got := g.reserve(c.size); got != c.want {
			t.Errorf("MinFreeBytes %d on %d bytes: reserve %d, want %d", c.min, c.size, got, c.want)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for _, c := range []struct {
		b    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {43200000, "41.2 MiB"}, {256 << 20, "256.0 MiB"}, {3 << 40, "3.0 TiB"},
	} {
		if got := FormatBytes(c.b); got != c.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", c.b, got, c.want)
		}
	}
}
