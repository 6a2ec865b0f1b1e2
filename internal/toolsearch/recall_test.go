package toolsearch

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// recorded is testdata/catalog.json: real servers' tools/list, recorded
// once (see testdata/README.md).
type recorded struct {
	Servers []struct {
		Name    string            `json:"name"`
		Package string            `json:"package"`
		Version string            `json:"version"`
		License string            `json:"license"`
		Tools   []json.RawMessage `json:"tools"`
	} `json:"servers"`
}

// task is one line of testdata/tasks.json: what a user asks, and the tools
// (exposed names) that do it; any of them is a right answer.
type task struct {
	Task  string   `json:"task"`
	Tools []string `json:"tools"`
}

// loadCatalog returns the recorded tools under the names a gateway exposes
// them (server__tool), their definitions renamed so, and their docs.
func loadCatalog(t testing.TB) (names []string, raws []json.RawMessage, docs []Doc) {
	data, err := os.ReadFile("testdata/catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	var c recorded
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Servers {
		for _, raw := range s.Tools {
			var def map[string]any
			if err := json.Unmarshal(raw, &def); err != nil {
				t.Fatal(err)
			}
			name := s.Name + "__" + def["name"].(string)
			def["name"] = name
			renamed, _ := json.Marshal(def)
			names = append(names, name)
			raws = append(raws, renamed)
			docs = append(docs, ParseTool(renamed))
		}
	}
	return names, raws, docs
}

// TestRecall measures the ranking on the recorded catalog of real servers
// with the committed task set: the right tool must be in the first five
// results for at least 90% of the tasks. The figures go in BENCHMARKS.md.
func TestRecall(t *testing.T) {
	names, _, docs := loadCatalog(t)
	servers := map[string]bool{}
	index := map[string]bool{}
	for _, n := range names {
		index[n] = true
		server, _, _ := strings.Cut(n, "__")
		servers[server] = true
	}
	if len(names) < 300 || len(servers) < 15 {
		t.Fatalf("the recorded catalog has %d tools of %d servers; the target is measured on at least 300 of 15", len(names), len(servers))
	}
	tasks := loadTasks(t)
	if len(tasks) < 100 {
		t.Fatalf("%d tasks; the target is measured on at least 100", len(tasks))
	}
	x := New(docs)
	var at1, at5, at10 int
	for _, tk := range tasks {
		right := map[string]bool{}
		for _, n := range tk.Tools {
			if !index[n] {
				t.Fatalf("task %q names tool %q, which the catalog does not have", tk.Task, n)
			}
			right[n] = true
		}
		rank := 0
		var got []string
		for i, h := range x.Search(tk.Task, 10, nil) {
			got = append(got, names[h.Doc])
			if rank == 0 && right[names[h.Doc]] {
				rank = i + 1
			}
		}
		switch {
		case rank == 1:
			at1++
			fallthrough
		case rank >= 2 && rank <= 5:
			at5++
			fallthrough
		case rank >= 6:
			at10++
		}
		if rank == 0 || rank > 5 {
			t.Logf("rank %d for %q (want one of %v); got %v", rank, tk.Task, tk.Tools, got)
		}
	}
	n := float64(len(tasks))
	t.Logf("%d tools of %d servers, %d tasks: recall@1 %.1f%%, recall@5 %.1f%%, recall@10 %.1f%%",
		len(names), len(servers), len(tasks), 100*float64(at1)/n, 100*float64(at5)/n, 100*float64(at10)/n)
	if float64(at5) < 0.9*n {
		t.Errorf("recall@5 is %.1f%%; the target is at least 90%%", 100*float64(at5)/n)
	}
}

// loadTasks reads testdata/tasks.json.
func loadTasks(t testing.TB) []task {
	data, err := os.ReadFile("testdata/tasks.json")
	if err != nil {
		t.Fatal(err)
	}
	var tasks []task
	if err := json.Unmarshal(data, &tasks); err != nil {
		t.Fatal(err)
	}
	return tasks
}
