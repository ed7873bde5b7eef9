package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// DocumentID returns the deterministic ID of one version of an external
// item: the same content seen again yields the same ID.
func DocumentID(client string, source SourceType, externalID, contentHash string) string {
	return hashParts("doc", client, string(source), externalID, contentHash)
}

// TaskID returns the deterministic ID of a task: one per document, kind and
// (for link tasks) URL.
func TaskID(docID string, kind TaskKind, linkURL string) string {
	return hashParts("task", docID, string(kind), linkURL)
}

// ContentHash returns the hash pollers record for a document's content.
func ContentHash(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}

// hashParts hashes length-prefixed parts, so ("ab","c") and ("a","bc") differ.
func hashParts(parts ...string) string {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
