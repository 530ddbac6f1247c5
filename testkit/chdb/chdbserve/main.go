// Command chdbserve runs SQL on an embedded ClickHouse (chDB) for the
// two-engine test: it reads one JSON request a line on standard input,
// {"query": "...", "format": "..."}, runs it in one embedded chDB engine and writes
// one JSON answer a line on standard output, {"out": "..."} or
// {"error": "..."}. It exits at the end of its input.
//
// It is a program of its own, started by package chdb, because chdb-go
// loads libchdb.so (CHDB_LIB_PATH) when it is initialised and panics when
// the library is missing: a test binary that imported it could not even
// start without the library, and a crash of the library takes down only
// this process.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/chdb-io/chdb-go/chdb"
)

type request struct {
	Query  string `json:"query"`
	Format string `json:"format"`
}

type answer struct {
	Out   string `json:"out,omitempty"`
	Error string `json:"error,omitempty"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: chdbserve <data directory>")
		os.Exit(2)
	}
	s, err := chdb.NewSession(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "chdbserve:", err)
		os.Exit(1)
	}
	defer s.Close()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<30)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var req request
		var a answer
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			a.Error = "chdbserve: bad request: " + err.Error()
		} else {
			if req.Format == "" {
				req.Format = "TabSeparated"
			}
			res, err := s.Query(req.Query, req.Format)
			switch {
			case err != nil:
				a.Error = err.Error()
			case res != nil:
				a.Out = res.String()
				res.Free()
			}
		}
		if err := out.Encode(a); err != nil {
			fmt.Fprintln(os.Stderr, "chdbserve:", err)
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "chdbserve:", err)
		os.Exit(1)
	}
}
