package access

import (
	"slices"
	"strconv"
	"strings"

	"github.com/mcpgate/mcpgate/internal/config"
)

// IdentitySummary says in one line how a client is recognised, never with
// a secret: a configured token shows the start of its hash, as `mcpgatectl
// token list` does, and issued tokens are counted.
func IdentitySummary(cc *config.Client, issued int) string {
	var how []string
	switch {
	case cc.TokenSHA256 != "":
		how = append(how, "token sha256:"+cc.TokenSHA256[:min(12, len(cc.TokenSHA256))]+"…")
	case cc.TokenCredential != "":
		how = append(how, "token from credential "+cc.TokenCredential)
	}
	if issued > 0 {
		word := " issued tokens"
		if issued == 1 {
			word = " issued token"
		}
		how = append(how, strconv.Itoa(issued)+word)
	}
	if len(cc.UnixUsers) > 0 {
		how = append(how, "unix users "+strings.Join(cc.UnixUsers, ","))
	}
	if len(cc.UnixGroups) > 0 {
		how = append(how, "unix groups "+strings.Join(cc.UnixGroups, ","))
	}
	if len(cc.OAuthSubjects) > 0 {
		how = append(how, "oauth subjects "+strings.Join(cc.OAuthSubjects, ","))
	}
	if len(cc.OAuthGroups) > 0 {
		how = append(how, "oauth groups "+strings.Join(cc.OAuthGroups, ","))
	}
	if len(how) == 0 {
		return "none"
	}
	return strings.Join(how, "; ")
}

// PolicySummary says in one line what a client may use.
func PolicySummary(cc *config.Client) string {
	uses := "tools " + strings.Join(cc.Tools, ",")
	if !slices.Equal(cc.Resources, []string{"*"}) {
		uses += "; resources " + strings.Join(cc.Resources, ",")
	}
	if !slices.Equal(cc.Prompts, []string{"*"}) {
		uses += "; prompts " + strings.Join(cc.Prompts, ",")
	}
	return uses
}
