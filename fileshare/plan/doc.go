// Package plan holds the sync decisions of file sharing, free of IO: which
// version of a path a share shows, which concurrent versions become
// conflict copies and under which name, and what a client must do to make
// its folder match (upload, fetch, make visible, record a delete, or stop).
package plan
