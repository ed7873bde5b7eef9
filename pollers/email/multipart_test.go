package email

import (
	"bytes"
	"testing"
)

func TestCountMultipartIgnoresCase(t *testing.T) {
	for _, raw := range []string{
		"", "/", "multipart", "multipart/", "/multipart/", "MULTIPART/mixed", "MultiPart/alternative; a=multipart/x",
		"xmultipart/", "multipar/", "multipart//multipart/", "Content-Type: multipart/mixed\r\n\r\n--b\r\nContent-Type: Multipart/related\r\n",
		"ultipart/", "é multipart/ ünïcode MULTIPART/",
	} {
		want := bytes.Count(bytes.ToLower([]byte(raw)), []byte("multipart/"))
		if got := countMultipart([]byte(raw)); got != want {
			t.Errorf("countMultipart(%q) = %d, want %d", raw, got, want)
		}
	}
}
