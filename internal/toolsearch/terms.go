package toolsearch

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
)

// stemmer turns text into search terms, remembering the stems it worked
// out: a catalog repeats its words a lot.
type stemmer struct {
	stems map[string]string
}

func newStemmer() *stemmer { return &stemmer{stems: map[string]string{}} }

// terms splits text into words (at every character that is not a letter
// or digit, and where lower case turns to upper, as in "listIssues"),
// drops stop words and one-letter words, and stems the rest (Porter2).
func (s *stemmer) terms(text string) []string {
	var out []string
	for _, w := range words(text) {
		w = strings.ToLower(w)
		if len(w) < 2 || stopWord(w) {
			continue
		}
		out = append(out, s.stem(w))
	}
	return out
}

func (s *stemmer) stem(w string) string {
	stem, ok := s.stems[w]
	if !ok {
		stem = english.Stem(w, true)
		s.stems[w] = stem
	}
	return stem
}

// words splits text at non-alphanumerics, and a word whose case changes
// also into its parts: "get_pullRequestFiles" is get, pullRequestFiles,
// pull, Request, Files; "JavaScript" is JavaScript, Java, Script, so that
// it is found as one word and as two. The words are substrings of text.
func words(text string) []string {
	var out []string
	start := -1     // byte offset of the current word
	var parts []int // where the parts of the current word start
	end := func(i int) {
		out = append(out, text[start:i])
		if len(parts) > 0 {
			from := start
			for _, p := range parts {
				out = append(out, text[from:p])
				from = p
			}
			out = append(out, text[from:i])
		}
		start, parts = -1, parts[:0]
	}
	var prev rune
	for i, r := range text {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			if start >= 0 {
				end(i)
			}
			prev = r
			continue
		}
		if start < 0 {
			start, prev = i, r
			continue
		}
		if unicode.IsUpper(r) {
			if unicode.IsLower(prev) {
				parts = append(parts, i)
			} else if unicode.IsUpper(prev) {
				// The last capital of a run starts the next part, as S
				// in HTTPServer.
				if next, _ := utf8.DecodeRuneInString(text[i+utf8.RuneLen(r):]); unicode.IsLower(next) {
					parts = append(parts, i)
				}
			}
		}
		prev = r
	}
	if start >= 0 {
		end(len(text))
	}
	return out
}

// stopWord reports whether w says nothing about which tool fits: English
// stop words, and what people add when they ask for something.
func stopWord(w string) bool {
	if english.IsStopWord(w) {
		return true
	}
	switch w {
	case "please", "want", "need", "would", "could", "like", "let", "us", "can", "also", "via", "using", "e.g", "eg", "etc", "i'd", "i'm":
		return true
	}
	return false
}

// synonyms are words people use in a task for what tool definitions
// usually call otherwise: a query term also matches these (stemmed when
// looked up). It is a short list of everyday equivalents in tooling, not
// a thesaurus.
var synonyms = map[string][]string{
	"folder":   {"directory"},
	"dir":      {"directory"},
	"repo":     {"repository"},
	"save":     {"write"},
	"erase":    {"delete"},
	"remove":   {"delete"},
	"forget":   {"delete"},
	"remember": {"memory"},
	"k8s":      {"kubernetes"},
	"kube":     {"kubernetes"},
	"db":       {"database"},
	"pr":       {"pull", "request"},
	"mr":       {"merge", "request"},
	"js":       {"javascript"},
	"picture":  {"image"},
	"photo":    {"image"},
	"webpage":  {"web", "page"},
	"website":  {"site", "web"},
}

// queryTerms are the terms of a query with their weights: its own terms
// count 1, their synonyms half as much, or as much where no tool uses the
// word itself (known reports whether one does).
func (s *stemmer) queryTerms(query string, known func(term string) bool) map[string]float64 {
	out := map[string]float64{}
	for _, w := range words(query) {
		w = strings.ToLower(w)
		if len(w) < 2 || stopWord(w) {
			continue
		}
		t := s.stem(w)
		out[t] = 1
		weight := 0.5
		if !known(t) {
			weight = 1
		}
		for _, syn := range synonyms[w] {
			if st := s.stem(syn); out[st] < weight {
				out[st] = weight
			}
		}
	}
	return out
}
