package site

import (
	"strings"
	"testing"
)

// A topic's retention, stored bytes and first retained seq per origin.
func TestStatusPageShowsTopicRetention(t *testing.T) {
	v := statusView{Site: "us-east-1", Sites: []string{"us-east-1", "eu-west-1"},
		Topics: []topicView{{Name: "jobs.events", PublishAck: "majority", Delivery: "persisted here", Stored: 12, StoredBytes: 4096,
			Retention: "interest, max age 24h0m0s", Origins: []topicOrigin{{"us-east-1", 40, 39}, {"eu-west-1", 0, 0}}}}}
	var b strings.Builder
	if err := page.Execute(&b, v); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"jobs.events — 12 messages stored here (4096 bytes)", "retention <code>interest, max age 24h0m0s</code>",
		"first retained seq: us-east-1 40 (dropped to 39); eu-west-1 none;"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
