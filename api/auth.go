package api

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jervis-dev/jervis/internal/store"
)

// KeyPrefix starts every API key secret, so that a leaked one is easy to
// recognise (and to scan for).
const KeyPrefix = "jvk_"

// Principal is who a request is: one client's key, or an admin key.
type Principal struct {
	KeyID  string
	Client string // empty for admin keys
	Role   string // store.RoleClient or store.RoleAdmin
}

type principalKey struct{}

func principalOf(ctx context.Context) Principal {
	p, _ := ctx.Value(principalKey{}).(Principal)
	return p
}

// NewKey returns a new key secret and its stored form. The secret is shown
// once; only its hash is kept.
func NewKey(role, client, name string) (secret string, k store.APIKey, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", k, err
	}
	var id [6]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", k, err
	}
	secret = KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	k = store.APIKey{ID: "key_" + hex.EncodeToString(id[:]), Client: client, Role: role, Name: name,
		Hash: store.HashAPIKey(secret), CreatedAt: time.Now().UTC()}
	return secret, k, store.ValidateAPIKey(k)
}

// IssueClientKey gives a client a new key (creating the client when it
// does not exist) and returns its secret, to be shown once, never logged.
func IssueClientKey(ctx context.Context, keys store.Clients, c store.Client, name string) (string, error) {
	if c.CreatedAt.IsZero() {
		c.CreatedAt = time.Now().UTC()
	}
	if _, err := keys.PutClient(ctx, c); err != nil {
		return "", err
	}
	secret, k, err := NewKey(store.RoleClient, c.ID, name)
	if err != nil {
		return "", err
	}
	if err := keys.CreateAPIKey(ctx, k); err != nil {
		return "", fmt.Errorf("key of client %s: %w", c.ID, err)
	}
	return secret, nil
}

// EnsureAdminKey makes sure an admin key exists. With envSecret (from
// JERVIS_ADMIN_KEY) that secret is the admin key; otherwise, when no admin
// key exists yet, one is generated and its secret returned — to be shown
// once, never logged. It returns "" when nothing new was generated.
func EnsureAdminKey(ctx context.Context, keys store.Clients, envSecret string) (string, error) {
	if envSecret != "" {
		if len(envSecret) < 16 {
			return "", errors.New("JERVIS_ADMIN_KEY: shorter than 16 characters")
		}
		hash := store.HashAPIKey(envSecret)
		if _, err := keys.LookupAPIKey(ctx, hash); err == nil {
			return "", nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return "", err
		}
		return "", keys.CreateAPIKey(ctx, store.APIKey{ID: "key_admin_env_" + hash[:8], Role: store.RoleAdmin, Name: "JERVIS_ADMIN_KEY",
			Hash: hash, CreatedAt: time.Now().UTC()})
	}
	existing, err := keys.ListAPIKeys(ctx, "")
	if err != nil {
		return "", err
	}
	for _, k := range existing {
		if k.Role == store.RoleAdmin && k.RevokedAt.IsZero() {
			return "", nil
		}
	}
	secret, k, err := NewKey(store.RoleAdmin, "", "generated at first start")
	if err != nil {
		return "", err
	}
	if err := keys.CreateAPIKey(ctx, k); err != nil {
		return "", fmt.Errorf("admin key: %w", err)
	}
	return secret, nil
}

// authenticate resolves the bearer key of r; role is the role the route
// needs.
func (s *Server) authenticate(role string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, secret, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") || secret == "" {
			writeError(w, &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated, Message: "an API key is required: Authorization: Bearer <key>"})
			return
		}
		k, err := s.cfg.Store.LookupAPIKey(r.Context(), store.HashAPIKey(strings.TrimSpace(secret)))
		if errors.Is(err, store.ErrNotFound) {
			writeError(w, &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated, Message: "unknown or revoked API key"})
			return
		}
		if err != nil {
			writeError(w, toError(err, s.log, r))
			return
		}
		if k.Role != role {
			msg := "this route needs a client key"
			if role == store.RoleAdmin {
				msg = "this route needs an admin key"
			}
			writeError(w, &Error{Status: http.StatusForbidden, Code: CodeForbidden, Message: msg})
			return
		}
		if !s.limiter.allow(k.ID) {
			w.Header().Set("Retry-After", "1")
			writeError(w, &Error{Status: http.StatusTooManyRequests, Code: CodeRateLimited, Message: "too many requests for this key"})
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, Principal{KeyID: k.ID, Client: k.Client, Role: k.Role})))
	})
}
