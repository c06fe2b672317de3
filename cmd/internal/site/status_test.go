package site

import (
	"strings"
	"testing"
)

func TestStatusPageRenders(t *testing.T) {
	v := statusView{Site: "us-east-1", Sites: []string{"us-east-1", "eu-west-1"}, Connected: map[string]bool{"eu-west-1": true},
		Uptime: "4s", Preds: []predView{{"majority", "majority(persisted(sites))"}},
		Streams: []streamView{{Origin: "us-east-1", Stream: "kv", Head: 5, Persisted: 5,
			Levels:    []levelRow{{"persisted", []uint64{5, 3}}},
			Frontiers: []frontierView{{"majority", 5, 1, 0}, {"all", 3, 1, 2}}}},
		Topics: []topicView{{Name: "jobs.events", PublishAck: "audience", Delivery: "majority", Stored: 12,
			Audience: []string{"us-east-1", "eu-west-1"}, Subs: []subView{{Name: "dash", Site: "eu-west-1", Consumers: 2, Unacked: 7}}}}}
	var b strings.Builder
	if err := page.Execute(&b, v); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Site us-east-1", "connected", "us-east-1/kv — head 5", "<td>3</td>", "majority(persisted(sites))",
		"jobs.events — 12 messages stored here", "<td class=l>dash</td>", `<td class="behind">7</td>`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
