package sqlite

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"hash/fnv"
)

// rowIDs is the chunk ID of each row of a client's vectors, and each ID's
// row. An ID in the canonical form of a UUID — what kb.ChunkID makes: 36
// characters, lower-case hex, hyphens at 8, 13, 18 and 23 — is kept as its
// 16 bytes, in a slice and a map without pointers (at 583,000 chunks the
// strings and their map were 56 MB of the heap, and a pointer each for the
// collector to follow); any other ID as its string, apart.
type rowIDs struct {
	keys   []uuid16         // per row; an odd row's is unused
	pos    map[uuid16]int32 // a UUID's row
	odd    map[int32]string // the rows whose ID is not a canonical UUID
	oddPos map[string]int32
}

type uuid16 [16]byte

// parseUUID reads a canonical UUID; ok is false for any other string.
func parseUUID(s string) (u uuid16, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	j := 0
	for i := 0; i < 36; {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			i++
			continue
		}
		hi, lo := unhex(s[i]), unhex(s[i+1])
		if hi > 15 || lo > 15 {
			return u, false
		}
		u[j] = hi<<4 | lo
		i, j = i+2, j+1
	}
	return u, true
}

// unhex is a lower-case hex digit's value, or 255.
func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return 255
}

func (u uuid16) String() string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

func (r *rowIDs) len() int { return len(r.keys) }

// reserve empties r with room for n rows.
func (r *rowIDs) reserve(n int) {
	*r = rowIDs{keys: make([]uuid16, 0, n), pos: make(map[uuid16]int32, n)}
}

// id is row i's chunk ID.
func (r *rowIDs) id(i int) string {
	if len(r.odd) > 0 {
		if s, ok := r.odd[int32(i)]; ok {
			return s
		}
	}
	return r.keys[i].String()
}

// find returns id's row.
func (r *rowIDs) find(id string) (int, bool) {
	if u, ok := parseUUID(id); ok {
		i, found := r.pos[u]
		return int(i), found
	}
	i, found := r.oddPos[id]
	return int(i), found
}

// add appends a row of chunk id (not in r).
func (r *rowIDs) add(id string) {
	i := int32(len(r.keys))
	u, ok := parseUUID(id)
	r.keys = append(r.keys, u)
	if ok {
		if r.pos == nil {
			r.pos = map[uuid16]int32{}
		}
		r.pos[u] = i
		return
	}
	if r.odd == nil {
		r.odd, r.oddPos = map[int32]string{}, map[string]int32{}
	}
	r.odd[i], r.oddPos[id] = id, i
}

// remove drops row i's ID; the last row's moves to i.
func (r *rowIDs) remove(i int) {
	last := int32(len(r.keys) - 1)
	at := int32(i)
	if s, ok := r.odd[at]; ok {
		delete(r.odd, at)
		delete(r.oddPos, s)
	} else {
		delete(r.pos, r.keys[at])
	}
	if at != last {
		if s, ok := r.odd[last]; ok {
			delete(r.odd, last)
			r.odd[at], r.oddPos[s] = s, at
		} else {
			r.pos[r.keys[last]] = at
		}
		r.keys[at] = r.keys[last]
	}
	r.keys = r.keys[:last]
}

// compare orders rows i and j as their IDs' strings order (a canonical
// UUID's bytes order as its string).
func (r *rowIDs) compare(i, j int) int {
	if len(r.odd) == 0 {
		return bytes.Compare(r.keys[i][:], r.keys[j][:])
	}
	return cmp.Compare(r.id(i), r.id(j))
}

// hash is a hash of row i's ID, the same in every process: a canonical
// UUID's first eight bytes (UUIDs made by kb.ChunkID are hashes already),
// any other ID's FNV-1a.
func (r *rowIDs) hash(i int) uint64 {
	if len(r.odd) > 0 {
		if s, ok := r.odd[int32(i)]; ok {
			h := fnv.New64a()
			h.Write([]byte(s))
			return h.Sum64()
		}
	}
	return binary.BigEndian.Uint64(r.keys[i][:8])
}
