package stabilizer

// transfer is how the state of one stream name's application is moved to
// a site that lacks the log (EnableStateTransfer).
type transfer struct{}
