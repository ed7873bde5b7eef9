package pollers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/urgency"
)

// Ingester is the one way documents get into the store — for the
// scheduler's polls, POST /api/v1/ingest and `jervis import` alike: parse
// (a file through the registry), stamp (client, connection, source type),
// store. Bad input has one behaviour everywhere: what cannot be parsed or
// read is stored anyway with the reason, to be quarantined, and so is a
// document the store refuses as invalid (never dropped); everything else
// goes on. Only a failure of the store itself stops it.
type Ingester struct {
	Store store.Documents
	Kinds *Registry
	// Priority is given to every document stored (store.PriorityLive for
	// what arrives now: a poll that is caught up, the ingest API; the zero
	// value, store.PriorityBulk, for imports and backfills).
	Priority int
}

// Receipt is what became of one document.
type Receipt struct {
	ID         string           `json:"id"`
	SourceType store.SourceType `json:"sourceType"`
	ExternalID string           `json:"externalId"`
	Version    int              `json:"version"`
	Created    bool             `json:"created"` // false: this content was already stored
	State      string           `json:"state"`
	// Unparsable says why the document could not be parsed: it is stored
	// all the same and will be quarantined with this reason.
	Unparsable string `json:"unparsable,omitempty"`
}

// StoreError is a failure of the store (not of the input): it stops an
// import or a poll.
type StoreError struct{ Err error }

func (e *StoreError) Error() string { return e.Err.Error() }
func (e *StoreError) Unwrap() error { return e.Err }

// Documents stores documents of one client's connection, together (one
// write where the store can). When that write fails none of them is
// acknowledged: no receipts, and putting them again is safe.
func (in Ingester) Documents(ctx context.Context, client, connection string, docs ...store.Document) ([]Receipt, error) {
	stamped := make([]store.Document, len(docs))
	for i, d := range docs {
		stamped[i] = in.stamp(client, connection, d)
	}
	ctx = in.urgent(ctx)
	rs, err := in.Store.PutDocuments(ctx, stamped)
	if err != nil {
		return nil, &StoreError{fmt.Errorf("store %s: %w", named(stamped), err)}
	}
	// The others are stored: each has its receipt, even when storing a
	// refused one as unparsable fails (the first such failure is returned,
	// and the refused ones after it are left for the caller's next try).
	out := make([]Receipt, 0, len(docs))
	var failed error
	for i, r := range rs {
		switch {
		case r.Err == nil:
			out = append(out, receipt(stamped[i], r.Stored, r.Created))
		case !errors.Is(r.Err, store.ErrInvalid):
			failed = cmp.Or(failed, error(&StoreError{fmt.Errorf("store %s: %w", stamped[i].ExternalID, r.Err)}))
		case failed == nil:
			rc, err := in.putRefused(ctx, client, connection, stamped[i], r.Err)
			if err != nil {
				failed = err
				continue
			}
			out = append(out, rc)
		}
	}
	return out, failed
}

// File parses one file and stores its documents as they are parsed; a
// file that could not be opened (openErr) or that breaks off is stored as
// a document that says so (the documents before the break are kept). A
// type no kind reads is ErrUnsupported, and nothing is stored.
func (in Ingester) File(ctx context.Context, client, connection, name string, content io.Reader, openErr error) ([]Receipt, error) {
	var out []Receipt
	err := in.FileDocuments(name, content, openErr, func(d store.Document) error {
		r, err := in.Put(ctx, client, connection, d)
		if err == nil {
			out = append(out, r)
		}
		return err
	})
	return out, err
}

// FileDocuments is File's reading half: it gives emit each document of the
// file as it is parsed, then, when the file could not be opened (openErr)
// or broke off, a document that says so. An error of emit (a StoreError
// from Put) stops it and is returned. Someone who stores what emit is
// given elsewhere (the importer, on a goroutine of its own) must store it
// with Put, in the order given.
func (in Ingester) FileDocuments(name string, content io.Reader, openErr error, emit func(store.Document) error) error {
	if !in.Kinds.Supported(name) {
		return fmt.Errorf("%w: %s", ErrUnsupported, name)
	}
	err := openErr
	if err == nil {
		err = in.Kinds.ParseFile(name, content, emit)
	}
	var se *StoreError
	if err == nil || errors.As(err, &se) {
		return err
	}
	return emit(in.Kinds.Unreadable(name, err))
}

// Put stamps and stores one document; one the store refuses as invalid is
// stored as unparsable with the reason. A failure of the store is a
// StoreError.
func (in Ingester) Put(ctx context.Context, client, connection string, d store.Document) (Receipt, error) {
	rs, err := in.Documents(ctx, client, connection, d)
	if err != nil {
		return Receipt{}, err
	}
	return rs[0], nil
}

// named names documents in an error: the first's external ID, and how
// many more.
func named(docs []store.Document) string {
	switch len(docs) {
	case 0:
		return "no documents"
	case 1:
		return docs[0].ExternalID
	}
	return fmt.Sprintf("%s and %d more", docs[0].ExternalID, len(docs)-1)
}

// stamp gives d the client, connection and priority of what it stores.
func (in Ingester) stamp(client, connection string, d store.Document) store.Document {
	d.Client, d.Connection, d.Priority = client, connection, in.Priority
	return d
}

// urgent marks ctx so that a live document's writes go before bulk ones.
func (in Ingester) urgent(ctx context.Context) context.Context {
	if in.Priority > store.PriorityBulk {
		return urgency.With(ctx)
	}
	return ctx
}

// putRefused stores d, which the store refused (refusal), as unparsable
// with the reason.
func (in Ingester) putRefused(ctx context.Context, client, connection string, d store.Document, refusal error) (Receipt, error) {
	st := d.SourceType
	if !st.Valid() {
		st = store.SourceFile
	}
	u := in.stamp(client, connection, store.Unparsable(st, d.ExternalID, d.Normalized.Title, d.Raw, fmt.Errorf("refused by the store: %w", refusal)))
	stored, created, err := in.Store.PutDocument(ctx, u)
	if err != nil {
		return Receipt{}, &StoreError{fmt.Errorf("store %s: %w", u.ExternalID, err)}
	}
	return receipt(u, stored, created), nil
}

// receipt says what became of d (as given to the store).
func receipt(d, stored store.Document, created bool) Receipt {
	reason, _ := d.Normalized.Metadata[store.MetaParseError].(string)
	return Receipt{ID: stored.ID, SourceType: stored.SourceType, ExternalID: stored.ExternalID, Version: stored.Version,
		Created: created, State: string(stored.State), Unparsable: reason}
}
