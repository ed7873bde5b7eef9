package kb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/jervis-dev/jervis/internal/store"
)

// MaxRefLen is the longest canonical ref accepted (bytes). Longer refs are
// an error rather than silently truncated: truncation could merge entities.
const MaxRefLen = 512

// maxBoundedValue is the longest value BoundedRef keeps whole.
const maxBoundedValue = 400

// BoundedRef returns namespace:value as a ref that fits MaxRefLen: a value
// up to 400 bytes as it is, a longer one (a URL with a long query, a
// mailer's overlong Message-ID) as its first 400 bytes, "#" and a hash of
// the whole value, so that two long values with one prefix stay two nodes.
func BoundedRef(namespace, value string) string {
	if len(value) <= maxBoundedValue {
		return namespace + ":" + value
	}
	sum := sha256.Sum256([]byte(value))
	cut := maxBoundedValue
	for cut > 0 && !utf8.RuneStart(value[cut]) {
		cut--
	}
	return namespace + ":" + value[:cut] + "#" + hex.EncodeToString(sum[:8])
}

// ErrBadRef means a ref cannot name a node: no namespace, nothing left of
// the value after normalisation, or too long.
var ErrBadRef = errors.New("bad ref")

// Ref is a canonical node reference, namespace:value.
type Ref struct {
	Namespace string
	Value     string
}

// String returns the canonical syntax, namespace:value.
func (r Ref) String() string { return r.Namespace + ":" + r.Value }

// ParseRef normalises and canonicalises a ref written as namespace:value or
// namespace::value:
//
//  1. format: both parts trimmed and lower-cased, whitespace runs collapsed to
//     "_", and characters other than letters, digits and . - _ @ + # / : turned
//     into "_" (the namespace keeps only letters, digits and _);
//  2. canonical: a value that repeats its namespace as a prefix loses it
//     (order:order_530798957 → order:530798957).
//
// Alias resolution, the third stage, needs the client's registry: see
// Resolver.
func ParseRef(s string) (Ref, error) {
	ns, val, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return Ref{}, fmt.Errorf("%w: %q has no namespace (want namespace:value)", ErrBadRef, clip(s))
	}
	val = strings.TrimPrefix(val, ":") // namespace::value
	return NewRef(ns, val)
}

// CheckRef reports whether s can name a node (ParseRef's error, or nil).
func CheckRef(s string) error {
	_, err := ParseRef(s)
	return err
}

// NewRef builds a canonical ref from its parts (see ParseRef).
func NewRef(namespace, value string) (Ref, error) {
	// A leading ":" would make namespace::value ambiguous.
	r := Ref{Namespace: normalizePart(namespace, true), Value: strings.TrimLeft(normalizePart(value, false), ":")}
	// Only "ns_": "jira:JIRA-123" is the issue 123 of project JIRA.
	if rest, ok := strings.CutPrefix(r.Value, r.Namespace+"_"); ok && meaningful(rest) {
		r.Value = rest
	}
	switch {
	case !meaningful(r.Namespace):
		return Ref{}, fmt.Errorf("%w: %q: empty namespace", ErrBadRef, clip(namespace+":"+value))
	case !meaningful(r.Value):
		return Ref{}, fmt.Errorf("%w: %q: nothing left of the value after normalisation", ErrBadRef, clip(namespace+":"+value))
	case len(r.String()) > MaxRefLen:
		return Ref{}, fmt.Errorf("%w: %d bytes, more than %d", ErrBadRef, len(r.String()), MaxRefLen)
	}
	return r, nil
}

func normalizePart(s string, namespace bool) string {
	if canonicalPart(s, namespace) {
		return s // most parts are: a ref read back, an address, a key
	}
	return rewritePart(s, namespace)
}

// rewritePart is normalizePart of a part it changes.
func rewritePart(s string, namespace bool) string {
	var b strings.Builder
	pendingSpace := false
	for _, r := range strings.ToLower(strings.TrimSpace(s)) {
		if unicode.IsSpace(r) {
			pendingSpace = true
			continue
		}
		if pendingSpace {
			b.WriteByte('_')
			pendingSpace = false
		}
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_':
			b.WriteRune(r)
		case !namespace && strings.ContainsRune(".-@+#/:", r):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// canonicalPart reports whether normalizePart would return s as it is: s
// is ASCII and holds nothing it changes (upper case, space, a mark it
// replaces).
func canonicalPart(s string, namespace bool) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '_':
		case !namespace && (c == '.' || c == '-' || c == '@' || c == '+' || c == '#' || c == '/' || c == ':'):
		default:
			return false
		}
	}
	return true
}

// meaningful reports whether s has a letter or digit.
func meaningful(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// Resolver resolves refs through a client's alias registry, with an
// in-memory cache that takes one lock per key, so concurrent ingests of the
// same entity look it up once.
type Resolver struct {
	registry store.Aliases

	mu      sync.Mutex
	entries map[string]*aliasEntry
}

type aliasEntry struct {
	mu        sync.Mutex
	loaded    bool
	canonical string // "" = no alias
}

// maxCached bounds the cache; it is dropped wholesale when full.
const maxCached = 100_000

// NewResolver returns a resolver over registry.
func NewResolver(registry store.Aliases) *Resolver {
	return &Resolver{registry: registry, entries: map[string]*aliasEntry{}}
}

func (r *Resolver) entry(client, key string) *aliasEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := client + "\x00" + key
	e := r.entries[k]
	if e == nil {
		if len(r.entries) >= maxCached {
			r.entries = map[string]*aliasEntry{}
		}
		e = &aliasEntry{}
		r.entries[k] = e
	}
	return e
}

// Resolve parses s and follows the client's aliases (up to 8 hops, so a
// cycle cannot loop).
func (r *Resolver) Resolve(ctx context.Context, client, s string) (Ref, error) {
	ref, err := ParseRef(s)
	if err != nil {
		return ref, err
	}
	for range 8 {
		target, err := r.lookup(ctx, client, ref.String())
		if err != nil || target == "" {
			return ref, err
		}
		next, err := ParseRef(target)
		if err != nil || next == ref {
			return ref, err
		}
		ref = next
	}
	return ref, nil
}

func (r *Resolver) lookup(ctx context.Context, client, key string) (string, error) {
	e := r.entry(client, key)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.loaded {
		return e.canonical, nil
	}
	target, err := r.registry.ResolveAlias(ctx, client, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		target = ""
	case err != nil:
		return "", fmt.Errorf("resolve alias %s: %w", key, err)
	}
	e.loaded, e.canonical = true, target
	return target, nil
}

// Prefetch looks up the keys (canonical refs) of client that the cache
// does not hold yet in one read of the registry, then what the aliases
// among them stand for in another (up to the 8 hops Resolve follows), so
// that resolving them asks nothing more: a batch's refs cost a read or
// two where each cost one.
func (r *Resolver) Prefetch(ctx context.Context, client string, keys []string) error {
	seen := map[string]bool{}
	for range 8 {
		var want []string
		for _, key := range keys {
			if seen[key] {
				continue
			}
			seen[key] = true
			e := r.entry(client, key)
			e.mu.Lock()
			if !e.loaded {
				want = append(want, key)
			}
			e.mu.Unlock()
		}
		if len(want) == 0 {
			return nil
		}
		found, err := r.registry.ResolveAliases(ctx, client, want)
		if err != nil {
			return fmt.Errorf("resolve aliases: %w", err)
		}
		keys = keys[:0:0]
		for _, key := range want {
			e := r.entry(client, key)
			e.mu.Lock()
			if !e.loaded { // an alias recorded meanwhile stays
				e.loaded, e.canonical = true, found[key]
			}
			if e.canonical != "" {
				if next, err := ParseRef(e.canonical); err == nil {
					keys = append(keys, next.String())
				}
			}
			e.mu.Unlock()
		}
	}
	return nil
}

// canonical returns keys (canonical refs) with each alias replaced by what
// it stands for, without repeats, in order; a key the registry cannot be
// asked about stays as it is.
func (r *Resolver) canonical(ctx context.Context, client string, keys []string) []string {
	var out []string
	for i, key := range keys {
		for range 8 {
			target, err := r.lookup(ctx, client, key)
			if err != nil || target == "" || target == key {
				break
			}
			key = target
		}
		if key != keys[i] && out == nil {
			out = slices.Clone(keys[:i])
		}
		if out != nil && !slices.Contains(out, key) {
			out = append(out, key)
		}
	}
	if out == nil {
		return keys
	}
	return out
}

// learn sets what the cache says alias stands for ("": nothing), after
// the registry was changed by the identity resolver.
func (r *Resolver) learn(client, alias, canonical string) {
	e := r.entry(client, alias)
	e.mu.Lock()
	e.loaded, e.canonical = true, canonical
	e.mu.Unlock()
}

// Alias records that alias stands for canonical in client's registry; both
// are normalised first.
func (r *Resolver) Alias(ctx context.Context, client, alias, canonical string) error {
	a, err := ParseRef(alias)
	if err != nil {
		return err
	}
	c, err := ParseRef(canonical)
	if err != nil {
		return err
	}
	if a == c {
		return nil
	}
	e := r.entry(client, a.String())
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := r.registry.RecordAlias(ctx, client, a.String(), c.String()); err != nil {
		return err
	}
	e.loaded, e.canonical = true, c.String()
	return nil
}
