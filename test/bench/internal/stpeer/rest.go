package stpeer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// rest is one instance's REST API.
type rest struct {
	site   string
	base   string // http://host:port
	apiKey string
	hc     *http.Client
}

// do sends a request and decodes a JSON answer into out (when not nil).
// A status other than 200 is an error carrying the body's first line.
func (r *rest) do(ctx context.Context, method, path string, q url.Values, out any) error {
	u := r.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return fmt.Errorf("stpeer: %s: %s %s: %w", r.site, method, path, err)
	}
	req.Header.Set("X-API-Key", r.apiKey)
	resp, err := r.hc.Do(req)
	if err != nil {
		return fmt.Errorf("stpeer: %s: %s %s: %w", r.site, method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
		return fmt.Errorf("stpeer: %s: %s %s: %s: %s", r.site, method, path, resp.Status, line)
	}
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
	} else {
		err = json.NewDecoder(resp.Body).Decode(out)
	}
	if err != nil {
		return fmt.Errorf("stpeer: %s: %s %s: reading the answer: %w", r.site, method, path, err)
	}
	return nil
}

// Conn is one remote device's entry in /rest/system/connections.
type Conn struct {
	Connected bool   `json:"connected"`
	Address   string `json:"address"`
	Type      string `json:"type"`
	// InBytesTotal and OutBytesTotal are what Syncthing counts on the
	// connections to the device: the plaintext inside TLS, so without
	// TLS's records and handshakes.
	InBytesTotal  int64 `json:"inBytesTotal"`
	OutBytesTotal int64 `json:"outBytesTotal"`
}

// connections returns the entries of /rest/system/connections by device ID.
func (r *rest) connections(ctx context.Context) (map[string]Conn, error) {
	var out struct {
		Connections map[string]Conn `json:"connections"`
	}
	if err := r.do(ctx, http.MethodGet, "/rest/system/connections", nil, &out); err != nil {
		return nil, err
	}
	return out.Connections, nil
}

// scan asks for a scan of the folder; Syncthing answers once it is done.
func (r *rest) scan(ctx context.Context) error {
	return r.do(ctx, http.MethodPost, "/rest/db/scan", url.Values{"folder": {FolderID}}, nil)
}

// event is an entry of /rest/events?events=ItemFinished.
type event struct {
	ID   int       `json:"id"`
	Type string    `json:"type"`
	Time time.Time `json:"time"`
	Data struct {
		Folder string  `json:"folder"`
		Item   string  `json:"item"`
		Error  *string `json:"error"`
		Action string  `json:"action"`
	} `json:"data"`
}

// itemEvents is the event mask of the subscription WaitInSync reads.
const itemEvents = "ItemFinished"

// events returns the ItemFinished events after since, waiting up to
// timeout (whole seconds; 0 answers at once) for the first one. The first
// call makes Syncthing's subscription for the mask; it keeps the last 1000
// events from then on.
func (r *rest) events(ctx context.Context, since int, timeout time.Duration) ([]event, error) {
	var evs []event
	q := url.Values{
		"events":  {itemEvents},
		"since":   {fmt.Sprint(since)},
		"timeout": {fmt.Sprint(int(timeout / time.Second))},
	}
	err := r.do(ctx, http.MethodGet, "/rest/events", q, &evs)
	return evs, err
}
