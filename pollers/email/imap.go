package email

// The IMAP source polls mailboxes of an IMAP server (emersion/go-imap/v2)
// and returns each new message as a source document (MIME parsed by Parse).
//
// The cursor holds, per mailbox, the UIDVALIDITY and the last UID taken.
// Each poll opens the mailbox read-only (EXAMINE, messages stay unseen),
// searches the UIDs above the last one and fetches up to Batch of them. When
// the server's UIDVALIDITY changes, the mailbox is read again from the
// start; documents are keyed by Message-ID and content, so nothing is stored
// twice.

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/pollers"
)

// TLS modes.
const (
	TLS      = "tls"      // implicit TLS (port 993)
	StartTLS = "starttls" // plaintext upgraded with STARTTLS (port 143)
	Plain    = "none"     // no TLS: loopback and tests only
)

// IMAPConfig configures an IMAPSource.
type IMAPConfig struct {
	Addr      string // host:port
	TLS       string // tls (default), starttls or none
	Username  string
	Password  string   `json:"-"`
	Mailboxes []string // default INBOX
	Batch     int      // messages per poll page (default 200)
	Timeout   time.Duration
	TLSConfig *tls.Config
}

// IMAPSource polls one account.
type IMAPSource struct {
	cfg IMAPConfig
}

var _ pollers.Source = (*IMAPSource)(nil)

// NewIMAP checks cfg and returns a source; it does not connect.
func NewIMAP(cfg IMAPConfig) (*IMAPSource, error) {
	cfg.TLS = cmp.Or(cfg.TLS, TLS)
	cfg.Batch = cmp.Or(cfg.Batch, 200)
	cfg.Timeout = cmp.Or(cfg.Timeout, 60*time.Second)
	if len(cfg.Mailboxes) == 0 {
		cfg.Mailboxes = []string{"INBOX"}
	}
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		return nil, fmt.Errorf("imap: address %q: %w", cfg.Addr, err)
	}
	if cfg.TLS != TLS && cfg.TLS != StartTLS && cfg.TLS != Plain {
		return nil, fmt.Errorf("imap: tls %q is not tls, starttls or none", cfg.TLS)
	}
	if cfg.Username == "" {
		return nil, errors.New("imap: no username")
	}
	return &IMAPSource{cfg: cfg}, nil
}

// mailboxCursor is where a mailbox was read up to.
type mailboxCursor struct {
	UIDValidity uint32 `json:"uidValidity"`
	LastUID     uint32 `json:"lastUid"`
}

func (s *IMAPSource) dial() (*imapclient.Client, error) {
	opts := &imapclient.Options{TLSConfig: s.cfg.TLSConfig}
	switch s.cfg.TLS {
	case StartTLS:
		return imapclient.DialStartTLS(s.cfg.Addr, opts)
	case Plain:
		return imapclient.DialInsecure(s.cfg.Addr, opts)
	}
	return imapclient.DialTLS(s.cfg.Addr, opts)
}

// Poll implements pollers.Source.
func (s *IMAPSource) Poll(ctx context.Context, cur string) (pollers.Batch, error) {
	cursors := map[string]mailboxCursor{}
	if cur != "" {
		if err := json.Unmarshal([]byte(cur), &cursors); err != nil {
			return pollers.Batch{}, fmt.Errorf("imap: cursor: %w", err)
		}
	}
	c, err := s.dial()
	if err != nil {
		return pollers.Batch{}, fmt.Errorf("imap: connect %s: %w", s.cfg.Addr, err)
	}
	defer c.Close()
	// Cancellation and the timeout close the connection, which ends any
	// command in progress.
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()

	if err := c.Login(s.cfg.Username, s.cfg.Password).Wait(); err != nil {
		return pollers.Batch{}, s.fail(ctx, "login", err)
	}
	var batch pollers.Batch
	budget := s.cfg.Batch
	for _, mb := range s.cfg.Mailboxes {
		sel, err := c.Select(mb, &imap.SelectOptions{ReadOnly: true}).Wait()
		if err != nil {
			return pollers.Batch{}, s.fail(ctx, "examine "+mb, err)
		}
		mc := cursors[mb]
		if mc.UIDValidity != sel.UIDValidity {
			mc = mailboxCursor{UIDValidity: sel.UIDValidity} // re-sync from the start
		}
		if sel.NumMessages > 0 && budget > 0 && uint32(sel.UIDNext) > mc.LastUID+1 {
			var set imap.UIDSet
			set.AddRange(imap.UID(mc.LastUID+1), 0) // n:*
			found, err := c.UIDSearch(&imap.SearchCriteria{UID: []imap.UIDSet{set}}, nil).Wait()
			if err != nil {
				return pollers.Batch{}, s.fail(ctx, "search "+mb, err)
			}
			var uids []imap.UID
			for _, u := range found.AllUIDs() {
				if uint32(u) > mc.LastUID { // "n:*" always matches the last message
					uids = append(uids, u)
				}
			}
			slices.Sort(uids)
			if len(uids) > budget {
				uids, batch.More = uids[:budget], true
			}
			if len(uids) > 0 {
				docs, last, err := s.fetch(ctx, c, mb, uids)
				if err != nil {
					return pollers.Batch{}, err
				}
				batch.Documents = append(batch.Documents, docs...)
				mc.LastUID = last
				budget -= len(uids)
			}
		}
		cursors[mb] = mc
	}
	_ = c.Logout().Wait()
	next, _ := json.Marshal(cursors)
	batch.Cursor = string(next)
	return batch, nil
}

// fetch reads whole messages by UID (BODY.PEEK[]: they stay unseen).
func (s *IMAPSource) fetch(ctx context.Context, c *imapclient.Client, mailbox string, uids []imap.UID) ([]store.Document, uint32, error) {
	section := &imap.FetchItemBodySection{Peek: true}
	msgs, err := c.Fetch(imap.UIDSetNum(uids...), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{section}}).Collect()
	if err != nil {
		return nil, 0, s.fail(ctx, "fetch "+mailbox, err)
	}
	slices.SortFunc(msgs, func(a, b *imapclient.FetchMessageBuffer) int { return cmp.Compare(a.UID, b.UID) })
	var docs []store.Document
	var last uint32
	for _, m := range msgs {
		raw := m.FindBodySection(section)
		var d store.Document
		if parsed, err := Parse(raw); err != nil {
			d = Unparsable(raw, err)
		} else {
			d = parsed.Document(raw)
		}
		d.Normalized.Metadata["mailbox"] = mailbox
		d.Normalized.Metadata["uid"] = uint32(m.UID)
		docs = append(docs, d)
		last = max(last, uint32(m.UID))
	}
	return docs, last, nil
}

// fail wraps an IMAP error; after cancellation it reports the cancellation.
func (s *IMAPSource) fail(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("imap: %s on %s: %w", op, s.cfg.Addr, context.Cause(ctx))
	}
	return fmt.Errorf("imap: %s on %s: %w", op, s.cfg.Addr, err)
}
