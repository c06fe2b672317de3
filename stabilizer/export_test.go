package stabilizer

// FrontierRecord returns the frontier record of (id, pred) that n applied
// to its store, published or not, for the external tests.
func FrontierRecord(n *Node, id StreamID, pred string) ([]byte, error) {
	return n.store.AppGet(nodeNS, frontierKey(id, pred))
}

// SetStatfs makes the node started from cfg read its free space and
// filesystem size from f instead of the filesystem under cfg.Dir.
func SetStatfs(cfg *Config, f func(dir string) (free, size int64, err error)) { cfg.statfs = f }

// CheckDisk runs one check of n's disk guard now, as its ticker does.
func CheckDisk(n *Node) { n.disk.check() }
