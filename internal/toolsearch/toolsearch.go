// Package toolsearch ranks tool definitions for a task described in words:
// BM25F over their names, titles, descriptions and parameters, with English
// stemming. It is deterministic and needs no network and no model.
package toolsearch

import (
	"maps"
	"math"
	"slices"
	"strings"
)

// Param is one parameter of a tool, as searched.
type Param struct {
	Name, Description string
}

// Doc is what of a tool is searched.
type Doc struct {
	Name        string // the tool's name, split at "_", "-", "." and case changes
	Title       string // its title (or annotations.title)
	Description string
	Params      []Param // the properties of its input schema
}

// field is one part of a Doc, weighted on its own.
type field int

const (
	fieldName field = iota
	fieldTitle
	fieldDescription
	fieldParamName
	fieldParamDescription
	numFields
)

// weights say how much a term found in each field counts: a tool's name
// and title say what it does, its description how, its parameters what it
// takes. lengthNorm is BM25's b per field: a long description says less
// per word than a short one; names are all short.
var (
	weights    = [numFields]float64{fieldName: 3, fieldTitle: 2, fieldDescription: 1, fieldParamName: 1, fieldParamDescription: 0.4}
	lengthNorm = [numFields]float64{fieldName: 0.3, fieldTitle: 0.3, fieldDescription: 0.75, fieldParamName: 0.5, fieldParamDescription: 0.75}
)

// k1 is BM25's saturation: how soon more occurrences of a term stop adding.
const k1 = 1.2

// posting is one document's weight for a term, its saturated pseudo
// frequency: everything of BM25F but the term's idf, which no query
// changes either.
type posting struct {
	doc    int32
	weight float32
}

// Index is an immutable index of tool definitions. Its methods may be
// called concurrently.
type Index struct {
	terms    map[string]int32 // term → its postings and idf
	postings [][]posting
	idf      []float32
	sorted   []string // the terms, sorted, for prefixes
	docs     int
}

// A query term no document has matches the terms it is a prefix of, if
// it has at least minPrefix bytes, at most maxPrefixTerms of them, with
// prefixWeight shared among them.
const (
	minPrefix      = 3
	maxPrefixTerms = 8
	prefixWeight   = 0.5
)

// Hit is one result of Search: the index of the Doc given to New, and its
// score (higher is better).
type Hit struct {
	Doc   int
	Score float64
}

// docTerm is how often a term occurs in each field of one document.
type docTerm struct {
	term  string
	count [numFields]uint16
}

// New indexes docs; a Hit's Doc is an index into docs.
func New(docs []Doc) *Index {
	stems := newStemmer()
	terms := make([][]docTerm, len(docs)) // each document's terms, sorted
	lens := make([][numFields]int, len(docs))
	var total [numFields]int
	at := map[string]int{} // a term's place in the document's terms
	for i, d := range docs {
		var list []docTerm
		clear(at)
		add := func(f field, text string) {
			for _, t := range stems.terms(text) {
				j, ok := at[t]
				if !ok {
					j = len(list)
					at[t] = j
					list = append(list, docTerm{term: t})
				}
				if list[j].count[f] < math.MaxUint16 {
					list[j].count[f]++
				}
				lens[i][f]++
			}
		}
		add(fieldName, d.Name)
		add(fieldTitle, d.Title)
		add(fieldDescription, d.Description)
		for _, p := range d.Params {
			add(fieldParamName, p.Name)
			add(fieldParamDescription, p.Description)
		}
		// Sorted, so that postings are built the same way every time.
		slices.SortFunc(list, func(a, b docTerm) int { return strings.Compare(a.term, b.term) })
		terms[i] = list
		for f := range numFields {
			total[f] += lens[i][f]
		}
	}
	var avg [numFields]float64
	for f := range numFields {
		avg[f] = max(1, float64(total[f])/float64(max(1, len(docs))))
	}
	x := &Index{terms: map[string]int32{}, docs: len(docs)}
	for i := range docs {
		var norm [numFields]float64
		for f := range numFields {
			norm[f] = 1 - lengthNorm[f] + lengthNorm[f]*float64(lens[i][f])/avg[f]
		}
		for _, dt := range terms[i] {
			tf := 0.0
			for f := range numFields {
				if n := dt.count[f]; n > 0 {
					tf += weights[f] * float64(n) / norm[f]
				}
			}
			id, ok := x.terms[dt.term]
			if !ok {
				id = int32(len(x.postings))
				x.terms[dt.term] = id
				x.postings = append(x.postings, nil)
			}
			x.postings[id] = append(x.postings[id], posting{doc: int32(i), weight: float32(tf * (k1 + 1) / (k1 + tf))})
		}
	}
	x.idf = make([]float32, len(x.postings))
	for id, p := range x.postings {
		df := float64(len(p))
		x.idf[id] = float32(math.Log(1 + (float64(x.docs)-df+0.5)/(df+0.5)))
		x.postings[id] = slices.Clip(p)
	}
	x.sorted = slices.Sorted(maps.Keys(x.terms))
	return x
}

// Len returns the number of documents indexed.
func (x *Index) Len() int { return x.docs }

// Search returns up to n documents that match query, best first; keep, if
// not nil, decides which documents may be returned at all. Equal scores
// are ordered by document index, so the same index and query always give
// the same answer. A query with no known term matches nothing.
func (x *Index) Search(query string, n int, keep func(doc int) bool) []Hit {
	if n <= 0 || x.docs == 0 {
		return nil
	}
	scores := make([]float64, x.docs)
	matched := false
	add := func(id int32, weight float64) {
		w := weight * float64(x.idf[id])
		for _, p := range x.postings[id] {
			scores[p.doc] += w * float64(p.weight)
			matched = true
		}
	}
	terms := newStemmer().queryTerms(query, func(t string) bool { _, ok := x.terms[t]; return ok })
	for _, t := range slices.Sorted(maps.Keys(terms)) { // sorted: the same sums every time
		if id, ok := x.terms[t]; ok {
			add(id, terms[t])
			continue
		}
		// A word no tool has may be the start of one ("kube", "config"):
		// the terms it begins count, a little, shared among them.
		if len(t) < minPrefix {
			continue
		}
		first, _ := slices.BinarySearch(x.sorted, t)
		last := first
		for last < len(x.sorted) && last-first < maxPrefixTerms && strings.HasPrefix(x.sorted[last], t) {
			last++
		}
		for _, term := range x.sorted[first:last] {
			add(x.terms[term], terms[t]*prefixWeight/float64(last-first))
		}
	}
	if !matched {
		return nil
	}
	var hits []Hit
	for doc, s := range scores {
		if s > 0 && (keep == nil || keep(doc)) {
			hits = append(hits, Hit{Doc: doc, Score: s})
		}
	}
	slices.SortFunc(hits, func(a, b Hit) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return a.Doc - b.Doc
	})
	return hits[:min(n, len(hits))]
}
