package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Connection is one source of one client. Its type names the kind that
// polls it, and the section of that name holds the kind's own settings
// ("imap: {addr: …}"), which the kind decodes and validates
// (pollers.Connector): this package knows no source kind.
type Connection struct {
	ID       string `yaml:"id"`
	Client   string `yaml:"client"`
	Type     string `yaml:"type"`     // the ConnectionType of a kind: imap, jira, confluence, git, filedrop, …
	Schedule string `yaml:"schedule"` // robfig/cron spec, e.g. "@every 2m"
	// Sections are the connection's other keys, by name: its type's
	// settings (and any misspelt section, which the kinds report).
	Sections map[string]*yaml.Node `yaml:",remain"`
}

// LookupEnv finds a variable in environ (os.Environ() form); the last one
// set wins, as with a shell.
func LookupEnv(name string, environ []string) (string, bool) {
	var v string
	var found bool
	for _, kv := range environ {
		if k, val, _ := strings.Cut(kv, "="); k == name {
			v, found = val, true
		}
	}
	return v, found
}

// Secret reads a secret named by an environment variable or a file; the
// error names where it looked, never the value.
func Secret(env, file string, environ []string) (string, error) {
	switch {
	case env != "" && file != "":
		return "", fmt.Errorf("set one of %s and a secret file, not both", env)
	case env != "":
		if v, ok := LookupEnv(env, environ); ok {
			return v, nil
		}
		return "", fmt.Errorf("environment variable %s is not set", env)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("secret file: %w", err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	return "", errors.New("no secret configured (password_env or password_file)")
}

// Secrets returns every secret value the configuration gives the process —
// the connections' passwords and tokens (every setting named *_env or
// *_file names one, and a URL's userinfo is one), the store's and the
// graph's passwords, the API keys of the environment — and the user names
// that go with them in Basic auth, for a redact.Redactor. Secrets it
// cannot read are left out (start-up reports those).
func (c Config) Secrets(environ []string) (secrets, users []string) {
	addURL := func(raw string) {
		if u, err := url.Parse(raw); err == nil && u.User != nil {
			p, _ := u.User.Password()
			secrets = append(secrets, u.User.Username(), p)
		}
	}
	for _, conn := range c.Connections {
		for _, section := range conn.Sections {
			var settings map[string]any
			if section == nil || section.Decode(&settings) != nil {
				continue
			}
			for k, v := range settings {
				s, _ := v.(string)
				switch {
				case s == "":
				case strings.HasSuffix(k, "_env"):
					if v, ok := LookupEnv(s, environ); ok {
						secrets = append(secrets, v)
					}
				case strings.HasSuffix(k, "_file"):
					if b, err := os.ReadFile(s); err == nil {
						secrets = append(secrets, strings.TrimRight(string(b), "\r\n"))
					}
				case k == "url":
					addURL(s)
				case k == "username":
					users = append(users, s)
				}
			}
		}
	}
	addURL(c.Store.Mongo.URI)
	for _, name := range SecretEnvVars {
		if v, ok := LookupEnv(name, environ); ok {
			secrets = append(secrets, v)
		}
	}
	if v, ok := LookupEnv("JERVIS_STORE_MONGO_URI", environ); ok {
		addURL(v)
	}
	slices.Sort(users)
	return secrets, slices.Compact(users)
}
