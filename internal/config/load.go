package config

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// Load reads the main configuration file at path, then every *.toml file in
// the conf.d directory beside it in lexical order, and returns the resolved
// configuration. A missing conf.d is fine; other files in it are ignored.
//
// Keys of [gateway] in later files override earlier ones key by key. A
// backend may be defined only once across all files.
//
// On failure Load returns a nil *Config and every problem it found: a single
// *Error, or an errors.Join of *Error values ordered by file and position. A
// missing main file yields an *Error that wraps fs.ErrNotExist.
func Load(path string) (*Config, error) {
	l := &loader{}
	if !l.read(path) {
		return nil, l.err()
	}
	l.readDropIns(filepath.Join(filepath.Dir(path), DropInDir))
	cfg := l.resolve()
	if err := l.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// loader accumulates the files of one Load call and the problems found.
type loader struct {
	files []*file
	errs  []sortableError
	reads int // files attempted so far; orders errors by file
}

// sortableError is an *Error with the rank of its file in reading order.
type sortableError struct {
	order int
	err   *Error
}

// position is a 1-based line and column; zero means unknown.
type position struct{ line, col int }

// file is one configuration file: its decoded document and where each key
// is, so that semantic errors can point at a line.
type file struct {
	path  string
	order int
	doc   map[string]any        // nil when the file is not valid TOML
	keys  map[string]position   // keyPath.id() → where that key first appears
	elems map[string][]position // keyPath.id() of an array → its elements
}

// lookup returns where the key at was written, or where its closest written
// parent was (keys inside array tables are not indexed). It never returns an
// unknown line.
func (f *file) lookup(at keyPath) position {
	for k := at; len(k) > 0; k = k[:len(k)-1] {
		if p, ok := f.keys[k.id()]; ok && p.line > 0 {
			return p
		}
	}
	return position{line: 1, col: 1}
}

func (l *loader) add(order int, e *Error) {
	l.errs = append(l.errs, sortableError{order, e})
}

// err returns nil, the only error, or all errors joined, in file order.
func (l *loader) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(l.errs, func(a, b sortableError) int {
		return cmp.Or(cmp.Compare(a.order, b.order),
			cmp.Compare(a.err.Line, b.err.Line),
			cmp.Compare(a.err.Col, b.err.Col))
	})
	if len(l.errs) == 1 {
		return l.errs[0].err
	}
	errs := make([]error, len(l.errs))
	for i, e := range l.errs {
		errs[i] = e.err
	}
	return errors.Join(errs...)
}

// read loads one file and reports whether it could be read at all.
func (l *loader) read(path string) bool {
	f := l.parse(path)
	if f == nil {
		return false
	}
	l.files = append(l.files, f)
	return true
}

// parse reads and decodes one file, reporting its problems. It returns nil
// if the file cannot be read; f.doc is nil if it is not valid TOML.
func (l *loader) parse(path string) *file {
	order := l.reads
	l.reads++
	data, err := os.ReadFile(path)
	if err != nil {
		l.add(order, &Error{File: path, Err: err,
			Msg: fmt.Sprintf("cannot read: %v; check that the file exists and is readable", pathErrorReason(err))})
		return nil
	}
	f := &file{path: path, order: order, keys: map[string]position{}, elems: map[string][]position{}}
	dupLines := l.index(f, data)
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		var de *toml.DecodeError
		if !errors.As(err, &de) {
			l.add(order, &Error{File: path, Line: 1, Err: err, Msg: fmt.Sprintf("invalid TOML: %v", err)})
			return f
		}
		line, col := de.Position()
		if !dupLines[line] { // already reported with both places
			// de.Key() is relative to the current table, and the message
			// names the key anyway.
			l.add(order, &Error{File: path, Line: line, Col: col, Err: err,
				Msg: "invalid TOML: " + strings.TrimPrefix(de.Error(), "toml: ") + "; fix it (syntax: https://toml.io/en/v1.0.0)"})
		}
		return f
	}
	f.doc = doc
	return f
}

// pathErrorReason strips the path from an *fs.PathError, which Error
// already names.
func pathErrorReason(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// readDropIns reads every *.toml file in dir in lexical order.
func (l *loader) readDropIns(dir string) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		l.add(l.reads, &Error{File: dir, Err: err,
			Msg: fmt.Sprintf("cannot read drop-in directory: %v; make it a readable directory or remove it", pathErrorReason(err))})
		l.reads++
	}
	for _, e := range entries { // sorted by name
		if !strings.HasSuffix(e.Name(), ".toml") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if st, err := os.Stat(path); err == nil && st.IsDir() {
			continue
		}
		l.read(path)
	}
}

// index records where every key and array element of data is written, and
// reports a backend table defined twice in the file. It returns the lines of
// such second definitions, whose TOML error is then not reported again.
// Syntax errors are left to the decoder, which reports them with position.
func (l *loader) index(f *file, data []byte) map[int]bool {
	ix := &indexer{l: l, f: f, defined: map[string]position{}, dupLines: map[int]bool{}, lineStarts: []int{0}}
	for i, c := range data {
		if c == '\n' {
			ix.lineStarts = append(ix.lineStarts, i+1)
		}
	}
	ix.p.Reset(data)
	var table keyPath
	for ix.p.NextExpression() {
		e := ix.p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			var at position
			table, at = ix.key(nil, e.Key())
			if e.Kind == unstable.Table {
				ix.definesBackend(table, at)
			}
		case unstable.KeyValue:
			ix.keyValue(table, e)
		}
	}
	return ix.dupLines
}

// indexer walks one file's syntax tree for index.
type indexer struct {
	l          *loader
	f          *file
	p          unstable.Parser
	lineStarts []int               // byte offset of each line's start
	defined    map[string]position // backends explicitly defined so far
	dupLines   map[int]bool
}

// pos converts a range of the document to a position; zero if unknown.
// Columns count bytes, as in toml.DecodeError. (Parser.Shape would rescan
// the document from the start for every key.)
func (ix *indexer) pos(r unstable.Range) position {
	if r.Length == 0 {
		return position{}
	}
	off := int(r.Offset)
	line, _ := slices.BinarySearch(ix.lineStarts, off+1) // lines starting at or before off
	return position{line: line, col: off - ix.lineStarts[line-1] + 1}
}

// key appends the parts of a (dotted) key to base, indexing each prefix, and
// returns the full path and the position of its last part.
func (ix *indexer) key(base keyPath, it unstable.Iterator) (keyPath, position) {
	path := slices.Clip(base)
	var at position
	for it.Next() {
		n := it.Node()
		path = append(path, string(n.Data))
		at = ix.pos(n.Raw)
		if _, ok := ix.f.keys[path.id()]; !ok {
			ix.f.keys[path.id()] = at
		}
	}
	return path, at
}

func (ix *indexer) keyValue(table keyPath, kv *unstable.Node) {
	path, at := ix.key(table, kv.Key())
	ix.definesBackend(path, at)
	v := kv.Value()
	switch v.Kind {
	case unstable.InlineTable:
		it := v.Children()
		for it.Next() {
			ix.keyValue(path, it.Node())
		}
	case unstable.Array:
		var elems []position
		it := v.Children()
		for it.Next() {
			elems = append(elems, ix.pos(it.Node().Raw))
		}
		if _, ok := ix.f.elems[path.id()]; !ok {
			ix.f.elems[path.id()] = elems
		}
	}
}

// definesBackend notes an explicit definition of backends.NAME ([backends.NAME]
// or backends.NAME = {…}) and reports a second one in the same file.
func (ix *indexer) definesBackend(path keyPath, at position) {
	if len(path) != 2 || path[0] != "backends" {
		return
	}
	first, ok := ix.defined[path.id()]
	if !ok {
		ix.defined[path.id()] = at
		return
	}
	ix.dupLines[at.line] = true
	ix.l.add(ix.f.order, &Error{File: ix.f.path, Line: at.line, Col: at.col, Key: path.String(),
		Msg: fmt.Sprintf("backend defined twice: first at %s:%d, again at %s:%d; merge them into one [%s] table",
			ix.f.path, first.line, ix.f.path, at.line, path)})
}

// resolve turns the decoded files into a Config, reporting every problem.
func (l *loader) resolve() *Config {
	cfg := Default()
	type backendsTable struct {
		d *decoder
		t map[string]any
	}
	var tables []backendsTable
	for _, f := range l.files {
		cfg.Files = append(cfg.Files, f.path)
		if f.doc == nil {
			continue
		}
		d := &decoder{l: l, f: f}
		for _, k := range slices.Sorted(maps.Keys(f.doc)) {
			at := keyPath{k}
			switch k {
			case "gateway":
				if t, ok := d.table(at, f.doc[k], "a table", "write a [gateway] header with its keys below it"); ok {
					decodeTable(d, at, t, gatewayFields(), &cfg.Gateway)
				}
			case "backends":
				if t, ok := d.table(at, f.doc[k], "a table of backends", "write a [backends.NAME] header for each backend"); ok {
					tables = append(tables, backendsTable{d, t})
				}
			case "clients":
				if t, ok := d.table(at, f.doc[k], "a table of clients", "write a [clients.NAME] header for each client"); ok {
					d.clients(t, cfg)
				}
			case "composites":
				d.composites(at, f.doc[k], cfg)
			case "profiles":
				d.profiles(at, f.doc[k], cfg)
			case "oauth":
				d.oauth(at, f.doc[k], &cfg.OAuth)
			case "telemetry":
				d.telemetry(at, f.doc[k], &cfg.Telemetry)
			default:
				d.unknown(at, []string{"gateway", "backends", "clients", "composites", "profiles", "oauth", "telemetry"}, "settings belong in [gateway], [backends.NAME], [clients.NAME], [composites.NAME], [profiles.NAME], [oauth] or [telemetry]")
			}
		}
	}
	// Backends inherit from the gateway as merged from all files.
	for _, bt := range tables {
		for _, name := range slices.Sorted(maps.Keys(bt.t)) {
			at := keyPath{"backends", name}
			if prev, ok := cfg.Backends[name]; ok {
				here := bt.d.f.lookup(at)
				bt.d.fail(at, "backend defined twice: first at %s:%d, again at %s:%d; keep one definition (a drop-in can add backends, not change one defined in another file)",
					prev.File, prev.Line, bt.d.f.path, here.line)
				continue
			}
			if b := bt.d.backend(at, bt.t[name], &cfg.Gateway); b != nil {
				cfg.Backends[name] = b
			}
		}
	}
	l.checkFallbacks(cfg)
	l.checkUnitNames(cfg)
	l.checkOAuth(cfg)
	l.checkTokenExchange(cfg)
	l.checkProfiles(cfg)
	return cfg
}
