package toolsearch

import (
	"fmt"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"
)

func TestWords(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"get_pull_request", []string{"get", "pull", "request"}},
		{"listIssues", []string{"listIssues", "list", "Issues"}},
		{"HTTPServer x", []string{"HTTPServer", "HTTP", "Server", "x"}},
		{"API-post-search", []string{"API", "post", "search"}},
		{"  Größe ändern ", []string{"Größe", "ändern"}},
		{"", nil},
	} {
		if got := words(c.in); !slices.Equal(got, c.want) {
			t.Errorf("words(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestTermsStemAndDropStopWords(t *testing.T) {
	got := newStemmer().terms("Please list the open Issues of my repositories")
	want := []string{"list", "open", "issu", "repositori"}
	if !slices.Equal(got, want) {
		t.Errorf("terms = %q, want %q", got, want)
	}
}

func TestParseTool(t *testing.T) {
	d := ParseTool([]byte(`{"name":"gh__create_issue","annotations":{"title":"Create issue"},"description":"Open an issue",
		"inputSchema":{"type":"object","properties":{"title":{"type":"string","description":"Issue title"},
		"labels":{"type":"array","items":{"type":"object","properties":{"color":{"description":"hex"}}}}}}}`))
	want := Doc{Name: "gh__create_issue", Title: "Create issue", Description: "Open an issue",
		Params: []Param{{"labels", ""}, {"color", "hex"}, {"title", "Issue title"}}}
	if fmt.Sprint(d) != fmt.Sprint(want) {
		t.Errorf("ParseTool = %+v, want %+v", d, want)
	}
	if d := ParseTool([]byte(`not json`)); d.Name != "" {
		t.Errorf("ParseTool of garbage = %+v", d)
	}
}

func TestSearchRanksAndFilters(t *testing.T) {
	x := New([]Doc{
		{Name: "fs__read_file", Description: "Read the contents of a file"},
		{Name: "fs__write_file", Description: "Write text to a file"},
		{Name: "gh__create_issue", Description: "Open a new issue in a repository", Params: []Param{{"title", "the issue's title"}}},
		{Name: "k8s__kubectl_logs", Description: "Show a pod's logs"},
	})
	names := func(hits []Hit) []int {
		var out []int
		for _, h := range hits {
			out = append(out, h.Doc)
		}
		return out
	}
	if got := names(x.Search("open an issue about the crash", 5, nil)); len(got) == 0 || got[0] != 2 {
		t.Errorf("issue search = %v, want doc 2 first", got)
	}
	if got := names(x.Search("save notes to a file", 1, nil)); !slices.Equal(got, []int{1}) {
		t.Errorf("save (a synonym of write) = %v, want [1]", got)
	}
	if got := names(x.Search("kube", 5, nil)); !slices.Equal(got, []int{3}) {
		t.Errorf("a prefix = %v, want [3]", got)
	}
	if got := names(x.Search("file", 5, func(doc int) bool { return doc != 0 })); !slices.Equal(got, []int{1}) {
		t.Errorf("filtered = %v, want [1]", got)
	}
	if got := x.Search("the of and", 5, nil); got != nil {
		t.Errorf("stop words only = %v, want nothing", got)
	}
	if got := x.Search("zebra", 5, nil); got != nil {
		t.Errorf("unknown word = %v, want nothing", got)
	}
	first := x.Search("file", 5, nil)
	for range 20 {
		if again := x.Search("file", 5, nil); fmt.Sprint(again) != fmt.Sprint(first) {
			t.Fatalf("the same search gave %v, then %v", first, again)
		}
	}
	if New(nil).Search("file", 5, nil) != nil {
		t.Error("an empty index found something")
	}
}

// catalogOf returns n docs: the recorded catalog repeated under numbered
// server names, as a gateway in front of many servers would hold.
func catalogOf(b testing.TB, n int) []Doc {
	_, _, docs := loadCatalog(b)
	var out []Doc
	for copy := 0; len(out) < n; copy++ {
		for _, d := range docs {
			if len(out) == n {
				break
			}
			d.Name = fmt.Sprintf("s%d_%s", copy, d.Name)
			out = append(out, d)
		}
	}
	return out
}

// BenchmarkSearch2000 is one search of a 2,000-tool catalog, cycling
// through the task set's queries; index-bytes is the heap the index holds.
func BenchmarkSearch2000(b *testing.B) {
	docs := catalogOf(b, 2000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	x := New(docs)
	runtime.GC()
	runtime.ReadMemStats(&after)
	queries := []string{}
	for _, tk := range loadTasks(b) {
		queries = append(queries, tk.Task)
	}
	b.ReportAllocs()
	cpu := cpuTime()
	n := 0
	for i := 0; b.Loop(); i++ {
		x.Search(queries[i%len(queries)], 10, nil)
		n++
	}
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(n), "cpu-ns/op")
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc), "index-bytes")
	runtime.KeepAlive(x)
}

// BenchmarkIndex2000 builds the index of a 2,000-tool catalog, as the
// gateway does after the catalog changed.
func BenchmarkIndex2000(b *testing.B) {
	docs := catalogOf(b, 2000)
	b.ReportAllocs()
	for b.Loop() {
		New(docs)
	}
}

// cpuTime is the CPU time the process used so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
