package kinds_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/kb"
	"github.com/jervis-dev/jervis/kb/embedded/embeddedtest"
	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/pollers/importer"
	"github.com/jervis-dev/jervis/pollers/kinds"
	"github.com/jervis-dev/jervis/qualifier/pipelinetest"
)

// calendar is a source kind defined here, outside the tree of kinds, the
// way a new one is written: iCalendar files (.ics), one document per
// event, whose graph shape is the event, who organised it and whom it
// invites. Nothing else in jervis knows of it.
type calendar struct{}

const sourceCalendar store.SourceType = "CALENDAR"

func (calendar) About() pollers.About {
	return pollers.About{Name: "calendar", SourceType: sourceCalendar, Noun: "calendar event",
		Namespaces: []string{"event", "person"}, Extensions: []string{".ics"}}
}

// eventMeta is the typed metadata between the parser and the shape.
type eventMeta struct {
	Start     string   `json:"start"`
	Organizer string   `json:"organizer,omitempty"`
	Attendees []string `json:"attendees,omitempty"`
}

// ReadFile reads the VEVENTs of a calendar (RFC 5545: folded lines
// unfolded, "NAME;PARAMS:VALUE" properties, mailto: addresses).
func (calendar) ReadFile(f *pollers.File, emit func(store.Document) error) error {
	raw, err := f.Bytes()
	if err != nil {
		return err
	}
	if !bytes.Contains(raw, []byte("BEGIN:VCALENDAR")) {
		return pollers.Decline(errors.New("no BEGIN:VCALENDAR"))
	}
	text := strings.NewReplacer("\r\n ", "", "\n ", "", "\r\n", "\n").Replace(string(raw))
	var ev map[string][]string
	var lines []string
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "BEGIN:VEVENT":
			ev, lines = map[string][]string{}, nil
		case line == "END:VEVENT" && ev != nil:
			lines = append(lines, line)
			d := store.Document{SourceType: sourceCalendar, ExternalID: first(ev["UID"]), Raw: []byte(strings.Join(lines, "\r\n")),
				Normalized: store.Normalized{Title: first(ev["SUMMARY"]), Body: strings.ReplaceAll(first(ev["DESCRIPTION"]), `\n`, "\n"),
					Metadata: pollers.MetaMap(eventMeta{Start: first(ev["DTSTART"]), Organizer: first(ev["ORGANIZER"]), Attendees: ev["ATTENDEE"]})}}
			if d.ExternalID == "" {
				d = pollers.UnparsableFile(f.Name, d.Raw, sourceCalendar, errors.New("an event without a UID"))
			}
			if err := emit(d); err != nil {
				return err
			}
			ev = nil
		case ev != nil:
			lines = append(lines, line)
			name, value, _ := strings.Cut(line, ":")
			name, _, _ = strings.Cut(name, ";")
			value = strings.TrimPrefix(value, "mailto:")
			ev[name] = append(ev[name], value)
		}
	}
	return nil
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// Shape: the event's node, organized_by its organiser and invites its
// attendees, each edge with the header line that says so.
func (calendar) Shape(d store.Document) pollers.Shape {
	var m eventMeta
	pollers.DecodeMeta(d, &m)
	main := "event:" + d.ExternalID
	var h pollers.Header
	h.Line("Event", d.Normalized.Title)
	h.Rel(main, "organized_by", pollers.Person(m.Organizer), h.Line("Organizer", m.Organizer))
	for _, a := range m.Attendees {
		h.Rel(main, "invites", pollers.Person(a), h.Line("Attendee", a))
	}
	return pollers.Shape{Main: main, Props: map[string]any{"title": d.Normalized.Title, "start": m.Start}, Lines: h.Lines, Relations: h.Relations,
		Summary: fmt.Sprintf("Calendar event %q on %s.", d.Normalized.Title, m.Start), From: m.Organizer, To: m.Attendees}
}

const standup = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Acme//Planner//EN\r\n" +
	"BEGIN:VEVENT\r\nUID:frame-review-7@acme.test\r\nDTSTART:20261201T090000Z\r\nSUMMARY:Frame supplier review\r\n" +
	"ORGANIZER;CN=Ann Novak:mailto:ann@acme.test\r\nATTENDEE;CN=Bob Smith:mailto:bob@acme.test\r\n" +
	"DESCRIPTION:Velotec quotes six weeks for the carbon frames\\; Ferro Frames ships in tw\r\n o. Decide which supplier gets batch 12.\r\nEND:VEVENT\r\n" +
	"BEGIN:VEVENT\r\nUID:retro-3@acme.test\r\nDTSTART:20261202T150000Z\r\nSUMMARY:Sprint retrospective\r\n" +
	"ORGANIZER:mailto:carol@acme.test\r\nDESCRIPTION:What slowed the release train.\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"

// Adding a source kind is one package and one line in the registry: this
// test registers the calendar kind above and runs a file of it through
// import, the indexers, the qualifier and search, changing nothing else.
func TestANewKindIsOnePackageAndOneLine(t *testing.T) {
	t.Parallel()
	registry, err := kinds.Registry(calendar{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "planner.ics"), []byte(standup), 0o644)
	os.WriteFile(filepath.Join(dir, "broken.ics"), []byte("this is not a calendar"), 0o644)

	all := embeddedtest.Open(t, "")
	im := &importer.Importer{Store: all.Store, Kinds: registry, Client: "acme", Connection: "import", DataDir: t.TempDir()}
	if err := im.Paths(t.Context(), []string{dir}); err != nil {
		t.Fatal(err)
	}
	if s := im.Summary; s.Files != 2 || s.Documents != 3 || s.Unparsable != 1 || s.Skipped != 0 {
		t.Fatalf("import: %+v", s)
	}
	pipelinetest.DrainKinds(t, all.Store, all.KB.KB, registry, nil)

	// The file that is no calendar is quarantined with the kind's reason.
	bad, err := all.Store.ListDocuments(t.Context(), store.DocumentQuery{Client: "acme", State: store.DocQuarantined})
	if err != nil || len(bad) != 1 || bad[0].SourceType != sourceCalendar || bad[0].Error == nil || !strings.Contains(bad[0].Error.Message, "ICS holds no calendar events: no BEGIN:VCALENDAR") {
		t.Fatalf("quarantined: %v %+v", err, bad)
	}
	// The events are the kind's nodes, with its edges and their evidence.
	docs, err := all.Store.ListDocuments(t.Context(), store.DocumentQuery{Client: "acme", SourceType: sourceCalendar, State: store.DocIndexed})
	if err != nil || len(docs) != 2 {
		t.Fatalf("indexed: %v %d", err, len(docs))
	}
	for _, d := range docs {
		task, err := all.Store.GetTask(t.Context(), "acme", store.TaskID(d.ID, store.KindData, ""))
		if err != nil || task.State != store.TaskDone {
			t.Fatalf("%s: task %+v %v", d.ExternalID, task, err)
		}
		mem, err := all.Store.GetTaskMemory(t.Context(), "acme", task.ID)
		if err != nil || mem.MainNode != "event:"+d.ExternalID || !strings.HasPrefix(mem.ContextSummary, "Calendar event ") {
			t.Fatalf("%s: memory %+v %v", d.ExternalID, mem, err)
		}
	}
	pack, err := all.KB.KB.Search(t.Context(), kb.SearchRequest{Client: "acme", Query: "which frame supplier for batch 12"})
	if err != nil {
		t.Fatal(err)
	}
	var passage bool
	var entities, relations []string
	for _, it := range pack.Items {
		switch it.Kind {
		case kb.ItemSource:
			passage = passage || strings.Contains(it.Content, "Ferro Frames ships in two")
		case kb.ItemEntity:
			entities = append(entities, it.NodeKeys...)
		case kb.ItemRelation:
			for _, e := range it.Evidence {
				relations = append(relations, it.EdgeType+" "+strings.Join(it.NodeKeys, " ")+" | "+e.Text)
			}
		}
	}
	if !passage || !slices.Contains(entities, "event:frame-review-7@acme.test") {
		t.Fatalf("search: passage %v, entities %v", passage, entities)
	}
	want := []string{"organized_by", "person:ann@acme.test", "Organizer: ann@acme.test"}
	if !slices.ContainsFunc(relations, func(r string) bool {
		return strings.Contains(r, want[0]) && strings.Contains(r, want[1]) && strings.Contains(r, want[2])
	}) {
		t.Fatalf("no %v relation with its evidence in %q", want, relations)
	}
}
