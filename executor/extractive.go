package executor

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
)

// Digest is what the extractive workflow finds: what is asked, of whom, by
// when, and the related entities with their evidence.
type Digest struct {
	Title     string     `json:"title"`
	From      string     `json:"from,omitempty"`
	AskedOf   []string   `json:"askedOf,omitempty"`
	Questions []string   `json:"questions,omitempty"`
	Requests  []string   `json:"requests,omitempty"`
	Decisions []string   `json:"decisions,omitempty"`
	Due       []string   `json:"due,omitempty"`
	Why       string     `json:"why"` // the routing reason
	Related   []Relation `json:"related,omitempty"`
}

// Relation is a related entity: an edge of the graph around the document
// and the text that supports it.
type Relation struct {
	Edge     string `json:"edge"` // from -[type]-> to
	Evidence string `json:"evidence,omitempty"`
}

// Extractive is the workflow used when no model is configured: a digest of
// the task from its TaskMemory, its document and the graph around it. It
// reads only.
type Extractive struct {
	KB *kb.KB
	// Related is how many relations the digest lists (default 12).
	Related int
}

// Name implements Workflow.
func (x *Extractive) Name() string { return "extractive" }

// Run implements Workflow.
func (x *Extractive) Run(ctx context.Context, in Input) (Output, error) {
	var asked store.Asks
	if in.Memory.Asks != nil {
		asked = *in.Memory.Asks
	}
	d := &Digest{Title: in.Document.Normalized.Title, From: asked.From, AskedOf: asked.Of, Questions: asked.Questions,
		Requests: asked.Requests, Decisions: asked.Decisions, Due: asked.Deadlines, Why: in.Memory.RoutingReason}
	items, err := x.KB.Related(ctx, in.Task.Client, in.MainNode, 1, 30)
	if err != nil {
		return Output{}, fmt.Errorf("related entities of %s: %w", in.MainNode, err)
	}
	limit := x.Related
	if limit <= 0 {
		limit = 12
	}
	own := "result:" + in.Task.ID
	for _, it := range items {
		if len(d.Related) == limit {
			break
		}
		if slices.Contains(it.NodeKeys, own) { // this task's earlier result (a rerun after a crash)
			continue
		}
		r := Relation{Edge: it.Content}
		if len(it.Evidence) > 0 {
			r.Evidence = clip(oneLine(it.Evidence[0].Text), 160)
		}
		d.Related = append(d.Related, r)
	}
	if err := ctx.Err(); err != nil {
		return Output{}, err
	}
	return Output{Workflow: x.Name(), Text: d.Text(in), Digest: d, StopReason: "digest"}, nil
}

// Text renders the digest for people (and for the result node's evidence).
func (d *Digest) Text(in Input) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Digest of %s (%s): %s\n", in.MainNode, strings.ToLower(string(in.Document.SourceType)), d.Title)
	if d.From != "" || len(d.AskedOf) > 0 {
		fmt.Fprintf(&b, "Asked by %s of %s.\n", or(d.From, "someone"), or(strings.Join(d.AskedOf, ", "), "the team"))
	}
	list := func(title string, xs []string) {
		if len(xs) == 0 {
			return
		}
		fmt.Fprintf(&b, "%s:\n", title)
		for _, x := range xs {
			fmt.Fprintf(&b, "- %s\n", clip(x, 300))
		}
	}
	list("Questions", d.Questions)
	list("Requests", d.Requests)
	list("Decisions asked for", d.Decisions)
	if len(d.Due) > 0 {
		fmt.Fprintf(&b, "By when: %s.\n", strings.Join(d.Due, "; "))
	} else {
		b.WriteString("By when: no deadline stated.\n")
	}
	if len(d.Questions)+len(d.Requests)+len(d.Decisions) == 0 {
		fmt.Fprintf(&b, "Nothing is asked in so many words; it was routed here because %s.\n", or(d.Why, "the qualifier said so"))
	} else if d.Why != "" {
		fmt.Fprintf(&b, "Routed because: %s.\n", d.Why)
	}
	if len(d.Related) > 0 {
		b.WriteString("Related:\n")
		for _, r := range d.Related {
			if r.Evidence != "" {
				fmt.Fprintf(&b, "- %s (%q)\n", r.Edge, r.Evidence)
			} else {
				fmt.Fprintf(&b, "- %s\n", r.Edge)
			}
		}
	}
	return strings.TrimSpace(b.String())
}

func or(a, b string) string {
	if a == "" {
		return b
	}
	return a
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		cut--
	}
	return s[:cut] + "…"
}
