// Command gen writes the demo corpus of deploy/demo: the world of Kestrel
// Cycles, an invented e-bike maker — its people, Jira projects (OPS, WEB,
// PAY) with links, comments and assignees, Confluence pages, a few hundred
// emails in threads that mention the issues and link to both, and a git
// history whose commit messages reference the issue keys. Deterministic:
// running it again writes the same files.
//
//	go run ./deploy/demo/gen
package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"
)

type person struct{ Name, Email, Role string }

var people = []person{
	{"Ann Novak", "ann.novak@kestrel.test", "operations lead"},
	{"Bob Smith", "bob.smith@kestrel.test", "site reliability engineer"},
	{"Carol Diaz", "carol.diaz@kestrel.test", "web developer"},
	{"Dmitri Volkov", "dmitri.volkov@kestrel.test", "data engineer"},
	{"Eva Horvat", "eva.horvat@kestrel.test", "payments product manager"},
	{"Farid Haddad", "farid.haddad@kestrel.test", "customer support lead"},
	{"Grace Lin", "grace.lin@kestrel.test", "CTO"},
	{"Hugo Martin", "hugo.martin@kestrel.test", "designer"},
}

type topic struct{ Summary, Detail string }

var topics = map[string][]topic{
	"OPS": {
		{"Rotate TLS certificates on the API gateway", "The certificates expire at the end of the month and the renewal job failed last quarter."},
		{"Nightly backups not copied offsite", "Restore tests show the newest offsite copy is nine days old."},
		{"Disk alerts on the orders database are noisy", "The disk usage alert fires every night during vacuum and wakes the on-call for nothing."},
		{"Move the warehouse scanners to the new VLAN", "The scanners still sit on the office network and lose their connection during backups."},
		{"Postmortem: checkout outage on Tuesday", "Checkout failed for forty minutes when the orders database ran out of disk."},
		{"Upgrade PostgreSQL from 14 to 16", "Version 14 leaves support next year and the upgrade needs a maintenance window."},
		{"Pager rotation for April", "Two people are on holiday in April and the rotation needs swaps."},
		{"Kubernetes nodes evicted under memory pressure", "Search indexer pods keep getting evicted in the eu-west pool."},
		{"Log retention for the payment service", "Auditors ask for ninety days of payment logs; we keep thirty."},
		{"VPN capacity for the Brno office closure", "Everyone works from home on Thursday during the electrical inspection."},
		{"Replace the staging load balancer", "The staging load balancer is end of life and drops long uploads."},
		{"Alert when the bike configurator API is slow", "Customers report a spinning wheel in the configurator but no alert fired."},
	},
	"WEB": {
		{"Image cropper freezes on mobile Safari", "Photos larger than twelve megapixels freeze the cropper on iPhones."},
		{"Dark mode for the customer dashboard", "Design delivered the palette; the settings page needs a toggle that persists across devices."},
		{"Password reset link expires before the email arrives", "The reset mail waits behind the marketing queue for up to two hours."},
		{"Bike configurator shows wrong battery range", "The range for the 750 Wh battery uses the 500 Wh figure."},
		{"Checkout button hidden behind the cookie banner", "On small screens the cookie banner covers the checkout button."},
		{"Add Czech and Slovak translations", "Marketing launches in Prague and Bratislava in May."},
		{"Order history page loads slowly", "Customers with many orders wait ten seconds for the history page."},
		{"Accessibility audit findings", "The audit found missing labels on the configurator and low contrast on buttons."},
		{"Wishlist disappears after login", "Items added before logging in are lost when the customer signs in."},
		{"Track delivery status on the order page", "Customers ask support where their bike is; the carrier offers a tracking API."},
		{"Newsletter signup sends two confirmation mails", "The signup form posts twice when the customer double-clicks."},
		{"Frame size guide is out of date", "The size guide still lists the 2024 frames."},
	},
	"PAY": {
		{"Refunds in Japanese yen are rounded wrongly", "Yen has no minor unit but refunds are rounded to two decimals."},
		{"Integrate the new fraud scoring vendor", "Transactions scoring above 0.8 should be held for manual review."},
		{"Invoice PDF line items wrap badly on A4", "Long product names push the totals onto a second page."},
		{"Support instalment payments for bikes over 3000 EUR", "Finance approved instalments through the new lender."},
		{"Reconcile the October payouts", "Finance found a mismatch of 4,200 yen in October."},
		{"Retry failed card captures", "Captures that fail with a timeout are never retried."},
		{"VAT for deliveries to Switzerland", "Swiss orders are charged EU VAT."},
		{"Chargeback notifications reach nobody", "The chargeback webhook posts to a mailbox nobody reads."},
		{"Apple Pay button missing on the checkout", "The domain verification file was removed in the last deploy."},
		{"Export payments for the auditors", "The auditors want a CSV of all payments since January."},
		{"Currency rates are cached for too long", "Rates are refreshed daily; finance wants hourly."},
		{"Payment method icons are blurry", "The icons are PNG at 1x and look blurry on retina screens."},
	},
}

var start = time.Date(2026, 2, 2, 8, 30, 0, 0, time.FixedZone("CET", 3600))

type issue struct {
	Key, Project string
	Topic        topic
	Assignee     person
	Reporter     person
	Created      time.Time
	Links        []link
	Comments     []string
	Commenters   []person
}

type link struct{ Type, Phrase, Dir, Key string }

func main() {
	out := "deploy/demo"
	if len(os.Args) > 1 {
		out = os.Args[1]
	}
	r := rand.New(rand.NewPCG(2026, 11))
	for _, d := range []string{"email", "jira", "confluence", "git"} {
		os.RemoveAll(filepath.Join(out, d))
		must(os.MkdirAll(filepath.Join(out, d), 0o755))
	}
	issues := makeIssues(r)
	writeJira(out, issues)
	pages := writeConfluence(out, r, issues)
	n := writeEmails(out, r, issues, pages)
	c := writeCommits(out, r, issues)
	fmt.Printf("demo corpus: %d issues, %d pages, %d emails, %d commits\n", len(issues), len(pages), n, c)
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func makeIssues(r *rand.Rand) []issue {
	var out []issue
	day := 0
	for _, p := range []string{"OPS", "WEB", "PAY"} {
		for i, t := range topics[p] {
			day++
			is := issue{Key: fmt.Sprintf("%s-%d", p, 100+i), Project: p, Topic: t, Assignee: pick(r, people), Reporter: pick(r, people),
				Created: start.Add(time.Duration(day) * 17 * time.Hour)}
			out = append(out, is)
		}
	}
	linkTypes := []link{{"Blocks", "blocks", "outward", ""}, {"Relates", "relates to", "outward", ""}, {"Duplicate", "duplicates", "outward", ""}}
	comments := []string{
		"I can reproduce this on staging.", "Moving this to the next sprint, the release freeze starts Monday.",
		"Fixed on a branch, needs review.", "Customer support has three more reports of this.",
		"Can we pair on this tomorrow morning?", "Blocked until the vendor answers.", "Deployed to staging, please verify.",
	}
	for i := range out {
		if r.IntN(3) > 0 {
			lt := pick(r, linkTypes)
			lt.Key = out[r.IntN(len(out))].Key
			if lt.Key != out[i].Key {
				out[i].Links = append(out[i].Links, lt)
			}
		}
		for range r.IntN(4) {
			out[i].Comments = append(out[i].Comments, pick(r, comments))
			out[i].Commenters = append(out[i].Commenters, pick(r, people))
		}
	}
	return out
}

func jiraTime(t time.Time) string { return t.Format("2006-01-02T15:04:05.000-0700") }

func writeJira(out string, issues []issue) {
	byProject := map[string][]map[string]any{}
	for _, is := range issues {
		var links []any
		for _, l := range is.Links {
			links = append(links, map[string]any{"type": map[string]any{"name": l.Type, "outward": l.Phrase, "inward": "is " + l.Phrase + " by"},
				"outwardIssue": map[string]any{"key": l.Key}})
		}
		var comments []any
		for i, c := range is.Comments {
			comments = append(comments, map[string]any{"author": user(is.Commenters[i]), "body": c, "created": jiraTime(is.Created.Add(time.Duration(i+1) * 3 * time.Hour))})
		}
		desc := fmt.Sprintf("%s\n\nReported by %s. See https://wiki.kestrel.test/%s/overview for context.", is.Topic.Detail, is.Reporter.Name, strings.ToLower(is.Project))
		byProject[is.Project] = append(byProject[is.Project], map[string]any{
			"id": fmt.Sprint(10000 + len(byProject[is.Project])), "key": is.Key, "self": "https://jira.kestrel.test/rest/api/2/issue/" + is.Key,
			"fields": map[string]any{
				"summary": is.Topic.Summary, "description": desc, "issuetype": map[string]any{"name": "Task"},
				"project": map[string]any{"key": is.Project}, "status": map[string]any{"name": pickStatus(is.Key)},
				"priority": map[string]any{"name": "Medium"}, "assignee": user(is.Assignee), "reporter": user(is.Reporter),
				"labels": []string{strings.ToLower(is.Project)}, "fixVersions": []any{map[string]any{"name": "2026.4"}},
				"issuelinks": links, "comment": map[string]any{"comments": comments, "total": len(comments)},
				"created": jiraTime(is.Created), "updated": jiraTime(is.Created.Add(time.Duration(len(is.Comments)*3+1) * time.Hour)),
			}})
	}
	for p, list := range byProject {
		b, _ := json.MarshalIndent(map[string]any{"startAt": 0, "maxResults": 50, "total": len(list), "issues": list}, "", " ")
		must(os.WriteFile(filepath.Join(out, "jira", strings.ToLower(p)+"-search.json"), b, 0o644))
	}
}

func pickStatus(key string) string {
	return []string{"Open", "In Progress", "In Review", "Done"}[len(key)%4]
}

func user(p person) map[string]any {
	return map[string]any{"name": strings.SplitN(p.Email, "@", 2)[0], "emailAddress": p.Email, "displayName": p.Name}
}

type page struct{ ID, Space, Title string }

func writeConfluence(out string, r *rand.Rand, issues []issue) []page {
	specs := []struct{ Space, Title, Body string }{
		{"OPS", "Operations overview", "The operations team runs the shop, the configurator API and the warehouse systems."},
		{"OPS", "Deploy runbook", "Deploys ship every second Wednesday. Check the error budget first and announce in #deploys."},
		{"OPS", "On-call handbook", "Acknowledge pages within five minutes; escalate to the incident commander after thirty."},
		{"OPS", "Backup and restore", "Backups run nightly and are copied offsite; restore tests run every Monday."},
		{"OPS", "Certificate management", "Certificates renew automatically thirty days before expiry; the renewal job reports to #ops."},
		{"WEB", "Web overview", "The web team owns the shop, the bike configurator and the customer dashboard."},
		{"WEB", "Release freeze policy", "The freeze starts on Monday at noon; only blocking fixes merge after it."},
		{"WEB", "Frontend style guide", "Components use the design tokens; every form field has a label."},
		{"WEB", "Localisation", "Translations live in the shop repository; marketing reviews every new language."},
		{"PAY", "Payments overview", "Payments owns checkout, refunds, payouts and the fraud checks."},
		{"PAY", "Refund rules", "Refunds use the currency's minor unit; zero-decimal currencies refund whole units."},
		{"PAY", "Fraud review process", "Held transactions are reviewed by the risk team within four hours."},
	}
	var pages []page
	for i, s := range specs {
		id := fmt.Sprint(98000 + i)
		pages = append(pages, page{id, s.Space, s.Title})
		var related []string
		for _, is := range issues {
			if is.Project == s.Space && r.IntN(4) == 0 {
				related = append(related, fmt.Sprintf(`<li><a href="https://jira.kestrel.test/browse/%s">%s</a> — %s</li>`, is.Key, is.Key, is.Topic.Summary))
			}
		}
		body := fmt.Sprintf(`<h1>%s</h1><p>%s</p><p>Owner: person:%s. Start at <ac:link><ri:page ri:content-title="%s overview" /></ac:link>.</p><h2>Related issues</h2><ul>%s</ul>`,
			s.Title, s.Body, strings.SplitN(pick(r, people).Email, "@", 2)[0], map[string]string{"OPS": "Operations", "WEB": "Web", "PAY": "Payments"}[s.Space], strings.Join(related, ""))
		author := pick(r, people)
		p := map[string]any{"id": id, "type": "page", "status": "current", "title": s.Title,
			"space":     map[string]any{"key": s.Space, "name": s.Space},
			"version":   map[string]any{"number": 1 + i%4, "when": start.Add(time.Duration(i) * 24 * time.Hour).UTC().Format(time.RFC3339), "by": map[string]any{"displayName": author.Name, "email": author.Email}},
			"ancestors": []any{map[string]any{"id": "97000", "title": s.Space + " home"}},
			"body":      map[string]any{"storage": map[string]any{"value": body, "representation": "storage"}},
			"_links":    map[string]any{"webui": "/spaces/" + s.Space + "/pages/" + id}}
		b, _ := json.MarshalIndent(p, "", " ")
		must(os.WriteFile(filepath.Join(out, "confluence", fmt.Sprintf("%s-%s.json", strings.ToLower(s.Space), id)), b, 0o644))
	}
	return pages
}

func writeEmails(out string, r *rand.Rand, issues []issue, pages []page) int {
	openers := []string{
		"Hi %s,\n\ncould you take a look at %s (%s) before Friday? %s\n\nDetails: https://jira.kestrel.test/browse/%s",
		"Hello %s,\n\nquick update on %s: %s %s\n\nThe runbook is at https://wiki.kestrel.test/%s/runbook?utm_source=mail",
		"%s, FYI: %s (%s) came up again today. %s\n\nNo action needed from you yet.\n\nTracking it in https://jira.kestrel.test/browse/%s",
		"Hi %s,\n\ncan we decide on %s (%s) at Thursday's sync? %s\n\nBackground: https://jira.kestrel.test/browse/%s",
	}
	replies := []string{
		"Thanks, I will have a look tomorrow morning.", "Done, I pushed a fix; it is waiting for review.",
		"I disagree on the priority: the release freeze starts Monday, let's move it to the next sprint.",
		"Looping in %s, who knows this part best.", "Can you send me the logs from the last failure?",
		"Agreed. I will update the ticket and the wiki page.", "Not this week, sorry: I am on call. Next Tuesday?",
	}
	n := 0
	write := func(id int, from, to person, cc []person, subject, body, inReplyTo string, refs []string, at time.Time) string {
		msgID := fmt.Sprintf("%d.%s@kestrel.test", id, at.Format("20060102150405"))
		var h strings.Builder
		fmt.Fprintf(&h, "From: %s <%s>\r\nTo: %s <%s>\r\n", from.Name, from.Email, to.Name, to.Email)
		if len(cc) > 0 {
			var cs []string
			for _, c := range cc {
				cs = append(cs, fmt.Sprintf("%s <%s>", c.Name, c.Email))
			}
			fmt.Fprintf(&h, "Cc: %s\r\n", strings.Join(cs, ", "))
		}
		fmt.Fprintf(&h, "Subject: %s\r\nDate: %s\r\nMessage-ID: <%s>\r\n", subject, at.Format(time.RFC1123Z), msgID)
		if inReplyTo != "" {
			fmt.Fprintf(&h, "In-Reply-To: <%s>\r\nReferences: <%s>\r\n", inReplyTo, strings.Join(refs, "> <"))
		}
		h.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n")
		h.WriteString(strings.ReplaceAll(body, "\n", "\r\n") + "\r\n\r\n" + from.Name + "\r\n")
		must(os.WriteFile(filepath.Join(out, "email", fmt.Sprintf("%04d.eml", id)), []byte(h.String()), 0o644))
		n++
		return msgID
	}
	id := 0
	for round := range 4 {
		for _, is := range issues {
			from, to := is.Reporter, is.Assignee
			if from == to {
				to = people[(indexOf(from)+1)%len(people)]
			}
			at := is.Created.Add(time.Duration(round*9+r.IntN(8)) * time.Hour)
			tmpl := openers[(round+len(is.Key))%len(openers)]
			var body string
			switch (round + len(is.Key)) % len(openers) {
			case 1:
				body = fmt.Sprintf(tmpl, first(to), is.Key, is.Topic.Summary, is.Topic.Detail, strings.ToLower(is.Project))
			default:
				body = fmt.Sprintf(tmpl, first(to), is.Key, is.Topic.Summary, is.Topic.Detail, is.Key)
			}
			subject := fmt.Sprintf("%s: %s", is.Key, is.Topic.Summary)
			var cc []person
			if r.IntN(2) == 0 {
				cc = append(cc, pick(r, people))
			}
			id++
			root := write(id, from, to, cc, subject, body, "", nil, at)
			refs := []string{root}
			prev, sender, recipient := root, to, from
			for k := range r.IntN(3) {
				text := pick(r, replies)
				if strings.Contains(text, "%s") {
					text = fmt.Sprintf(text, pick(r, people).Name)
				}
				id++
				prev = write(id, sender, recipient, nil, "Re: "+subject, text+"\n\n> "+strings.SplitN(body, "\n", 2)[0], prev, refs, at.Add(time.Duration(k+1)*47*time.Minute))
				refs = append(refs, prev)
				sender, recipient = recipient, sender
			}
		}
	}
	// A few company-wide notices with links to the wiki.
	notices := []string{
		"The quarterly offsite will be in Lisbon from 14 to 16 May. Send dietary requirements by Friday.",
		"Reminder: expense reports for March are due on the 5th. See https://wiki.kestrel.test/finance/expenses.",
		"The Brno office is closed on Thursday for the electrical inspection. Please work from home.",
		"Security notice: a phishing campaign impersonates our payroll provider. Do not open salary_update.zip.",
	}
	for i, text := range notices {
		id++
		write(id, people[6], people[i%len(people)], nil, "Notice: "+strings.SplitN(text, ".", 2)[0], text, "", nil, start.Add(time.Duration(30+i*11)*24*time.Hour))
	}
	_ = pages
	return n
}

func first(p person) string { return strings.SplitN(p.Name, " ", 2)[0] }

func indexOf(p person) int {
	for i, q := range people {
		if q == p {
			return i
		}
	}
	return 0
}

type commit struct {
	Message string            `json:"message"`
	Author  string            `json:"author"`
	Email   string            `json:"email"`
	When    time.Time         `json:"when"`
	Branch  string            `json:"branch"`
	Files   map[string]string `json:"files"`
}

func writeCommits(out string, r *rand.Rand, issues []issue) int {
	verbs := []string{"Fix", "Handle", "Guard against", "Speed up", "Log", "Test"}
	areas := map[string][]string{"OPS": {"deploy/", "infra/", "alerts/"}, "WEB": {"web/src/", "web/styles/"}, "PAY": {"payments/", "payments/refunds/"}}
	var commits []commit
	at := start
	for i, is := range issues {
		for k := range 1 + r.IntN(3) {
			at = at.Add(time.Duration(2+r.IntN(20)) * time.Hour)
			dev := is.Assignee
			verb := pick(r, verbs)
			msg := fmt.Sprintf("%s %s (refs %s)", verb, strings.ToLower(is.Topic.Summary), is.Key)
			if k == 0 && i%2 == 0 {
				msg = fmt.Sprintf("%s %s\n\nFixes %s.", verb, strings.ToLower(is.Topic.Summary), is.Key)
			}
			branch := "main"
			if is.Project == "WEB" && k > 0 {
				branch = "feature/web"
			}
			file := pick(r, areas[is.Project]) + strings.ToLower(strings.ReplaceAll(is.Key, "-", "_")) + ".go"
			commits = append(commits, commit{msg, dev.Name, dev.Email, at, branch, map[string]string{file: fmt.Sprintf("// %s\npackage x\n\nconst step = %d\n", is.Key, k)}})
		}
	}
	b, _ := json.MarshalIndent(commits, "", " ")
	must(os.WriteFile(filepath.Join(out, "git", "commits.json"), b, 0o644))
	return len(commits)
}
