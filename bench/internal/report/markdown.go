package report

import "fmt"

// UpdateMarkdown is written next.
func UpdateMarkdown(path, plots, results string, r *Results) error {
	return fmt.Errorf("not yet")
}
