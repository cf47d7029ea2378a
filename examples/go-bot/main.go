// A team chat bot's calls to the taskzilla-sleep worker, with the Go standard library only.
//
//	TASKZILLA_URL=http://127.0.0.1:8765 TASKZILLA_TEAM=platform \
//	TASKZILLA_READ_TOKEN=... TASKZILLA_WRITE_TOKEN=... go run .
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"
)

const guest = "guest-visitor" // the author who asks to be forgotten

// The fields this bot reads; the worker's /openapi.json documents them all.
type Episode struct {
	ID         string `json:"id"`
	Team       string `json:"team"`
	Channel    string `json:"channel"`
	Author     string `json:"author"`
	Text       string `json:"text"`
	TS         string `json:"ts"`
	Provenance string `json:"provenance"`
}

type RecallItem struct {
	Kind          string  `json:"kind"`
	ID            string  `json:"id"`
	Team          string  `json:"team"`
	Text          string  `json:"text"`
	Author        *string `json:"author"`
	Channel       *string `json:"channel"`
	Time          *string `json:"time"`
	Provenance    string  `json:"provenance"`
	EvidenceCount *int    `json:"evidence_count"`
	Draft         bool    `json:"draft"`
}

type ContradictionView struct {
	Contradiction struct {
		ID         string  `json:"id"`
		Resolution *string `json:"resolution"`
		ResolvedBy *string `json:"resolved_by"`
	} `json:"contradiction"`
	Old *string `json:"old"`
	New *string `json:"new"`
}

// APIError is the one error shape: {"error": {"code", "message", "details"}}.
type APIError struct {
	Status int
	Body   struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Body.Code, e.Body.Message)
}

type Client struct {
	base, token string
	http        http.Client
}

// call sends body (if any) as JSON and decodes a 2xx answer into out; anything else is an *APIError.
// Busy (429: ingests queued, or a night holds the memory) is retried after Retry-After seconds.
func (c *Client) call(method, path string, body, out any) error {
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return err
		}
	}
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequest(method, c.base+path, bytes.NewReader(data))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.http.Do(req)
		if err != nil {
			return err
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode == http.StatusTooManyRequests && attempt < 5 {
			wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			time.Sleep(time.Duration(max(wait, 1)) * time.Second)
			continue
		}
		if resp.StatusCode >= 300 {
			apiErr := &APIError{Status: resp.StatusCode}
			_ = json.Unmarshal(raw, apiErr)
			return apiErr
		}
		return json.Unmarshal(raw, out)
	}
}

func (c *Client) recall(team, q string, k int) ([]RecallItem, error) {
	var got struct {
		Items []RecallItem `json:"items"`
	}
	query := url.Values{"q": {q}, "team": {team}, "k": {strconv.Itoa(k)}}
	err := c.call("GET", "/v1/recall?"+query.Encode(), nil, &got)
	return got.Items, err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func must(what string, err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		os.Exit(1)
	}
}

func main() {
	base, team := os.Getenv("TASKZILLA_URL"), os.Getenv("TASKZILLA_TEAM")
	timeout := http.Client{Timeout: 60 * time.Second}
	reader := &Client{base: base, token: os.Getenv("TASKZILLA_READ_TOKEN"), http: timeout}
	writer := &Client{base: base, token: os.Getenv("TASKZILLA_WRITE_TOKEN"), http: timeout}
	var problems []string

	said := [][3]string{
		{"lena", "human", "The on-call handover is every Monday at 10:00 in #ops."},
		{"martin", "human", "Reminder: on-call handover happens Mondays at 10:00."},
		{"sara", "human", "We do the on-call handover on Monday mornings at 10."},
		{guest, "human", "As a guest I joined the on-call handover on Monday, thanks all."},
		{"helper-bot", "ai-draft", "Draft answer: the on-call handover might be on Tuesdays?"},
	}
	var episodes []Episode
	for i, s := range said {
		episodes = append(episodes, Episode{
			ID:   fmt.Sprintf("%s-go-bot-%d", team, i), // stable ids: sending the batch again stores nothing twice
			Team: team, Channel: "ops", Author: s[0], Provenance: s[1], Text: s[2],
			TS: time.Now().Add(-time.Duration(len(said)-i) * time.Minute).Format(time.RFC3339),
		})
	}
	var stored struct{ New, Present int }
	must("ingest", writer.call("POST", "/v1/episodes", map[string]any{"episodes": episodes}, &stored))
	fmt.Printf("ingested: %d new, %d already present\n", stored.New, stored.Present)

	items, err := reader.recall(team, "when is the on-call handover?", 8)
	must("recall", err)
	fmt.Printf("recall: %d items\n", len(items))
	for _, it := range items {
		cite := "no evidence count"
		if it.Kind == "episode" && it.Author != nil && it.Channel != nil {
			cite = fmt.Sprintf("%s in #%s", *it.Author, *it.Channel)
		} else if it.EvidenceCount != nil {
			cite = fmt.Sprintf("%d messages", *it.EvidenceCount)
		}
		when := "no time"
		if it.Time != nil {
			when = *it.Time
		}
		fmt.Printf("  [%s] %q (%s, %s)\n", it.Kind, it.Text, cite, when)
		if it.Team != team {
			problems = append(problems, "recall returned an item of team "+it.Team)
		}
		if it.Draft || it.Provenance == "ai-draft" {
			problems = append(problems, "recall returned the bot's own draft "+it.ID)
		}
	}

	var open []ContradictionView
	must("contradictions", reader.call("GET", "/v1/contradictions?team="+url.QueryEscape(team), nil, &open))
	fmt.Printf("contradictions open: %d\n", len(open))
	if len(open) > 0 {
		fmt.Printf("  old: %q\n  new: %q\n", deref(open[0].Old), deref(open[0].New))
		first := open[0].Contradiction
		var done struct {
			ID         string `json:"id"`
			Resolution string `json:"resolution"`
			ResolvedBy string `json:"resolved_by"`
		}
		path := "/v1/contradictions/" + url.PathEscape(first.ID) + "/resolve"
		must("resolve", writer.call("POST", path, map[string]string{"keep": "new", "note": "confirmed by the go bot"}, &done))
		fmt.Printf("resolved %s: keep %s, by %s\n", done.ID, done.Resolution, done.ResolvedBy)
	}

	var forgot struct {
		By        string   `json:"by"`
		Forgotten []string `json:"episodes_forgotten"`
	}
	ask := map[string]string{"team": team, "author": guest, "reason": "asked to be forgotten"}
	must("forget", writer.call("POST", "/v1/forget", ask, &forgot))
	fmt.Printf("forgot %s: %d episodes, by %s\n", guest, len(forgot.Forgotten), forgot.By)
	after, err := reader.recall(team, "on-call handover guest", 20)
	must("recall", err)
	for _, it := range after {
		if it.Author != nil && *it.Author == guest {
			problems = append(problems, guest+" is still recalled after forget")
		}
	}

	err = reader.call("POST", "/v1/episodes", map[string]any{"episodes": episodes[:1]}, &stored)
	if apiErr, isAPI := err.(*APIError); isAPI {
		fmt.Printf("read token refused a write: %d %s\n", apiErr.Status, apiErr.Body.Code)
		if apiErr.Status != http.StatusForbidden {
			problems = append(problems, fmt.Sprintf("the read token's write got %d, not 403", apiErr.Status))
		}
	} else {
		problems = append(problems, fmt.Sprintf("the read token's write was not refused: %v", err))
	}

	for _, p := range problems {
		fmt.Fprintln(os.Stderr, "PROBLEM:", p)
	}
	if len(problems) > 0 {
		fmt.Println("failed")
		os.Exit(1)
	}
	fmt.Println("ok")
}
