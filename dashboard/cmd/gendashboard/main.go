package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/meshless/meshless/dashboard"
)

func main() {
	out := flag.String("o", "docs/grafana/meshless.json", "the file to write (- for standard output)")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gendashboard:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	data, err := dashboard.JSON()
	if err != nil {
		return err
	}
	if out == "-" {
		_, err = os.Stdout.Write(data)
		return err
	}
	return os.WriteFile(out, data, 0o644)
}
