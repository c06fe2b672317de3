package stabilizer

// FrontierRecord returns the frontier record of (id, pred) that n applied
// to its store, published or not, for the external tests.
func FrontierRecord(n *Node, id StreamID, pred string) ([]byte, error) {
	return n.store.AppGet(nodeNS, frontierKey(id, pred))
}
