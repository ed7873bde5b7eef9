// Package synthcorpus writes a deterministic synthetic company's sources,
// as files `jervis import` reads, for benchmarks at any scale: mail
// threads (mbox) whose messages cite issues and pages, Jira issues
// (REST search responses) with comments, assignees and links to earlier
// issues, and wiki pages (Markdown) linking issues and each other. The
// same people appear in every source (a mail sender is an assignee and a
// page's author). Sizes run from one line to about 60,000 characters
// (log-normal: most are a paragraph or two). Commits are not generated
// (a Git history needs a repository; the dev corpus has a real one).
//
// The same n writes the same files, byte for byte.
package synthcorpus

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Counts says what Write wrote.
type Counts struct {
	Messages, Issues, Pages, Files int
	Bytes                          int64
}

// Documents is how many documents the files hold.
func (c Counts) Documents() int { return c.Messages + c.Issues + c.Pages }

// Shares of the documents by source.
const (
	mailShare  = 0.45
	issueShare = 0.40
)

// MaxWords bounds a body (about 60,000 characters).
const MaxWords = 9000

type person struct{ first, last, login string }

func (p person) name() string  { return p.first + " " + p.last }
func (p person) email() string { return p.login + "@synth.test" }

type gen struct {
	rng    *rand.Rand
	zipf   *rand.Zipf
	words  []string
	people []person
	start  time.Time
}

var (
	firsts = []string{"Ann", "Bob", "Chris", "Dana", "Eva", "Filip", "Gita", "Hugo", "Ines", "Jan", "Kim", "Lena", "Milan", "Nora", "Olga", "Petr", "Quinn", "Rita", "Sam", "Tereza", "Uma", "Viktor", "Wendy", "Xaver", "Yara", "Zoe"}
	lasts  = []string{"Novak", "Svoboda", "Dvorak", "Cerny", "Prochazka", "Kucera", "Vesely", "Horak", "Nemec", "Marek", "Pospisil", "Hajek", "Jelinek", "Kral", "Ruzicka", "Benes", "Fiala", "Sedlacek", "Dolezal", "Zeman"}
	common = strings.Fields("the a to of and in is for on that with it be this we as not are at from by or have an but will can should when after before if then build release server client error fails crash update version test deploy config database user page request response timeout memory service api login cache queue backup certificate network latency")
)

func newGen(n int) *gen {
	rng := rand.New(rand.NewPCG(0x6a657276, uint64(n)))
	g := &gen{rng: rng, start: time.Date(2025, 1, 6, 9, 0, 0, 0, time.UTC)}
	// A vocabulary of made-up words (syllables), Zipf-distributed after
	// the common English ones.
	syll := strings.Fields("ka lo mi ne ru ta vo si pe da ro li mu te zu fa no ge bi sa")
	g.words = append(g.words, common...)
	for len(g.words) < 6000 {
		var b strings.Builder
		for range 2 + rng.IntN(3) {
			b.WriteString(syll[rng.IntN(len(syll))])
		}
		g.words = append(g.words, b.String())
	}
	g.zipf = rand.NewZipf(rng, 1.1, 2, uint64(len(g.words)-1))
	nPeople := max(20, n/50)
	for i := range nPeople {
		f, l := firsts[i%len(firsts)], lasts[(i/len(firsts))%len(lasts)]
		login := strings.ToLower(f + "." + l)
		if i >= len(firsts)*len(lasts) {
			login += fmt.Sprint(i)
		}
		g.people = append(g.people, person{first: f, last: l, login: login})
	}
	return g
}

// size is a body's length in words: log-normal, median ~60, clamped to
// 3..MaxWords; one in 300 is as long as a body gets (a pasted log, a long
// spec).
func (g *gen) size() int {
	if g.rng.IntN(300) == 0 {
		return MaxWords
	}
	w := math.Exp(4.1 + 1.3*g.rng.NormFloat64())
	return int(min(MaxWords, max(3, w)))
}

func (g *gen) person() person { return g.people[g.rng.IntN(len(g.people))] }

// text is words sentences and paragraphs, with cite(i) mixed in (links
// and issue keys) about once per 80 words.
func (g *gen) text(words int, cite func() string) string {
	var b strings.Builder
	sentence := 0
	for i := range words {
		w := g.words[g.zipf.Uint64()]
		if sentence == 0 {
			w = strings.ToUpper(w[:1]) + w[1:]
		} else {
			b.WriteByte(' ')
		}
		b.WriteString(w)
		sentence++
		if cite != nil && g.rng.IntN(80) == 0 {
			b.WriteString(" " + cite())
		}
		if sentence > 6 && g.rng.IntN(10) == 0 || i == words-1 {
			b.WriteByte('.')
			sentence = 0
			if g.rng.IntN(6) == 0 {
				b.WriteString("\n\n")
			} else if i < words-1 {
				b.WriteByte(' ')
			}
		}
	}
	return b.String()
}

func (g *gen) title() string {
	t := g.text(3+g.rng.IntN(6), nil)
	return strings.TrimSuffix(t, ".")
}

func issueKey(i int) string { return fmt.Sprintf("SYN-%d", i+1) }

// Write writes n documents' files under dir (created when missing).
func Write(dir string, n int) (Counts, error) {
	var c Counts
	if n < 1 {
		return c, fmt.Errorf("synthcorpus: %d documents", n)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return c, err
	}
	g := newGen(n)
	issues := max(1, int(float64(n)*issueShare))
	messages := int(float64(n) * mailShare)
	pages := max(0, n-issues-messages)
	c.Issues, c.Messages, c.Pages = issues, messages, pages
	cite := func() string {
		switch g.rng.IntN(4) {
		case 0:
			return issueKey(g.rng.IntN(issues))
		case 1:
			return "https://jira.synth.test/browse/" + issueKey(g.rng.IntN(issues))
		case 2:
			if pages > 0 {
				return fmt.Sprintf("https://wiki.synth.test/pages/%d", g.rng.IntN(pages)+1)
			}
		}
		return fmt.Sprintf("https://docs.synth.test/guide/%s", g.words[g.zipf.Uint64()])
	}
	write := func(name string, fill func(w *bufio.Writer) error) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		w := bufio.NewWriter(f)
		err = fill(w)
		if ferr := w.Flush(); err == nil {
			err = ferr
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if st, serr := os.Stat(filepath.Join(dir, name)); serr == nil {
			c.Bytes += st.Size()
		}
		c.Files++
		return err
	}

	// Jira: search responses of 100 issues.
	for lo := 0; lo < issues; lo += 100 {
		hi := min(issues, lo+100)
		err := write(fmt.Sprintf("jira-%05d.json", lo/100), func(w *bufio.Writer) error {
			list := make([]map[string]any, 0, hi-lo)
			for i := lo; i < hi; i++ {
				list = append(list, g.issue(i, cite))
			}
			return json.NewEncoder(w).Encode(map[string]any{"startAt": lo, "maxResults": 100, "total": issues, "issues": list})
		})
		if err != nil {
			return c, err
		}
	}
	// Mail: threads of 1 to 8 messages, 500 messages per mbox.
	for lo := 0; lo < messages; lo += 500 {
		hi := min(messages, lo+500)
		err := write(fmt.Sprintf("list-%05d.mbox", lo/500), func(w *bufio.Writer) error {
			for i := lo; i < hi; {
				thread := min(hi-i, 1+g.rng.IntN(8))
				g.thread(w, i, thread, cite)
				i += thread
			}
			return nil
		})
		if err != nil {
			return c, err
		}
	}
	// Pages: one Markdown file each.
	for i := range pages {
		err := write(fmt.Sprintf("page-%06d.md", i+1), func(w *bufio.Writer) error {
			author := g.person()
			fmt.Fprintf(w, "# %s\n\nOwner: %s <%s>\n\n%s\n", g.title(), author.name(), author.email(), g.text(g.size(), cite))
			return nil
		})
		if err != nil {
			return c, err
		}
	}
	return c, nil
}

func (g *gen) at(i int) time.Time { return g.start.Add(time.Duration(i) * 7 * time.Minute) }

func (g *gen) user(p person) map[string]any {
	return map[string]any{"name": p.login, "displayName": p.name(), "emailAddress": p.email()}
}

func (g *gen) issue(i int, cite func() string) map[string]any {
	created := g.at(i).Format("2006-01-02T15:04:05.000-0700")
	fields := map[string]any{
		"summary": g.title(), "description": g.text(g.size(), cite),
		"status":    map[string]any{"name": []string{"Open", "In Progress", "Resolved", "Closed"}[g.rng.IntN(4)]},
		"issuetype": map[string]any{"name": []string{"Bug", "Task", "Story", "Improvement"}[g.rng.IntN(4)]},
		"priority":  map[string]any{"name": []string{"Low", "Medium", "High", "Critical"}[g.rng.IntN(4)]},
		"project":   map[string]any{"key": "SYN", "name": "Synth"},
		"assignee":  g.user(g.person()), "reporter": g.user(g.person()),
		"labels": []string{g.words[g.zipf.Uint64()]}, "created": created, "updated": created,
	}
	var comments []map[string]any
	for k := range g.rng.IntN(7) {
		comments = append(comments, map[string]any{"author": g.user(g.person()), "body": g.text(g.size()/2+3, cite),
			"created": g.at(i).Add(time.Duration(k+1) * time.Hour).Format("2006-01-02T15:04:05.000-0700")})
	}
	if len(comments) > 0 {
		fields["comment"] = map[string]any{"comments": comments}
	}
	var links []map[string]any
	for range g.rng.IntN(3) {
		if i == 0 {
			break
		}
		t := [][3]string{{"Blocks", "is blocked by", "blocks"}, {"Relates", "relates to", "relates to"}, {"Duplicate", "is duplicated by", "duplicates"}}[g.rng.IntN(3)]
		links = append(links, map[string]any{"type": map[string]any{"name": t[0], "inward": t[1], "outward": t[2]},
			"outwardIssue": map[string]any{"key": issueKey(g.rng.IntN(i))}})
	}
	if len(links) > 0 {
		fields["issuelinks"] = links
	}
	return map[string]any{"id": fmt.Sprint(10000 + i), "key": issueKey(i), "fields": fields}
}

// thread writes messages first..first+n-1 as one thread: each a reply to
// the one before.
func (g *gen) thread(w *bufio.Writer, first, n int, cite func() string) {
	subject := g.title()
	var refs []string
	for k := range n {
		i := first + k
		from, to := g.person(), g.person()
		id := fmt.Sprintf("<m%d@synth.test>", i)
		at := g.at(i)
		fmt.Fprintf(w, "From %s %s\n", from.email(), at.Format("Mon Jan _2 15:04:05 2006"))
		fmt.Fprintf(w, "From: %s <%s>\nTo: %s <%s>\nDate: %s\nMessage-ID: %s\n", from.name(), from.email(), to.name(), to.email(), at.Format(time.RFC1123Z), id)
		s := subject
		if k > 0 {
			s = "Re: " + subject
			fmt.Fprintf(w, "In-Reply-To: %s\nReferences: %s\n", refs[len(refs)-1], strings.Join(refs, " "))
		}
		fmt.Fprintf(w, "Subject: %s\nMIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n\n", s)
		body := g.text(g.size(), cite)
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "From ") {
				w.WriteByte('>')
			}
			w.WriteString(line)
			w.WriteByte('\n')
		}
		fmt.Fprintf(w, "\n%s\n\n", from.first)
		refs = append(refs, id)
	}
}
