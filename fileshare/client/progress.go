package client

import "sync/atomic"

// Direction says which way a transfer goes.
type Direction string

// Directions of a Transfer.
const (
	Upload   Direction = "upload"
	Download Direction = "download"
)

// Transfer is the progress of one file's upload or download.
type Transfer struct {
	Dir  Direction `json:"dir"`
	Path string    `json:"path"`
	// Bytes is what the transfer moves over the network (the chunks the
	// other side lacks), Done how much of it has moved.
	Bytes int64 `json:"bytes"`
	Done  int64 `json:"done"`
	// Size is the file's size; Chunks its chunk count.
	Size   int64 `json:"size"`
	Chunks int   `json:"chunks"`
	// Reused counts chunks not sent: the site held them (upload), or they
	// were in the version's partial file already (a resumed download) or
	// were copied from another partial file or a local file (download).
	Reused int `json:"reused"`
}

// Progress receives the engine's transfers as they go. Uploads run side by
// side (Options.Uploads), so calls for different transfers may come from
// several goroutines at once; the calls for one transfer come in order,
// from one goroutine. An implementation must be safe for concurrent use
// and must not block for long.
type Progress interface {
	// Started is called once per transfer, before any byte moves.
	Started(t Transfer)
	// Advanced is called after each chunk moved.
	Advanced(t Transfer)
	// Finished is called once at the end; err is nil on success.
	Finished(t Transfer, err error)
}

type nopProgress struct{}

func (nopProgress) Started(Transfer)         {}
func (nopProgress) Advanced(Transfer)        {}
func (nopProgress) Finished(Transfer, error) {}

// Stats counts what a Syncer moved since it was opened.
type Stats struct {
	BytesUploaded     int64 `json:"bytes_uploaded"`
	ChunksUploaded    int64 `json:"chunks_uploaded"`
	ChunksDeduped     int64 `json:"chunks_deduplicated"` // not uploaded: the site held them
	BytesDownloaded   int64 `json:"bytes_downloaded"`
	ChunksDownloaded  int64 `json:"chunks_downloaded"`
	ChunksFromPartial int64 `json:"chunks_from_partial"` // in a partial file already: fetched before (a resumed download), or for another version
	ChunksFromLocal   int64 `json:"chunks_from_local"`   // read from files already in the folder
	FilesUploaded     int64 `json:"files_uploaded"`
	FilesDownloaded   int64 `json:"files_downloaded"`
	FilesRemoved      int64 `json:"files_removed"`
	Conflicts         int64 `json:"conflicts"`
	Rounds            int64 `json:"rounds"`
}

type stats struct {
	bytesUp, chunksUp, deduped, bytesDown, chunksDown, fromPartial, fromLocal atomic.Int64
	filesUp, filesDown, removed, conflicts, rounds                            atomic.Int64
}

func (s *stats) snapshot() Stats {
	return Stats{BytesUploaded: s.bytesUp.Load(), ChunksUploaded: s.chunksUp.Load(), ChunksDeduped: s.deduped.Load(),
		BytesDownloaded: s.bytesDown.Load(), ChunksDownloaded: s.chunksDown.Load(), ChunksFromPartial: s.fromPartial.Load(),
		ChunksFromLocal: s.fromLocal.Load(), FilesUploaded: s.filesUp.Load(), FilesDownloaded: s.filesDown.Load(),
		FilesRemoved: s.removed.Load(), Conflicts: s.conflicts.Load(), Rounds: s.rounds.Load()}
}
