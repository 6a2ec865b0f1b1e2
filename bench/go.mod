module github.com/mcpgate/mcpgate/bench

go 1.26.0
