// promcheck holds meshlife serve's monitoring to Prometheus' own code:
//
//   - the alerts (charts/meshlife/files/monitoring/rules.yaml) through rulefmt.ParseFile with
//     the parser options and name validation `promtool check rules` uses: the file's schema,
//     each rule's PromQL, each annotation's Go template, and no two rules alike (promtool's
//     duplicate lint). The promtool binary itself is not built: cmd/promtool links every service
//     discovery's cloud SDK, minutes of a cold build for none of this.
//   - each query of the Grafana dashboard (dashboard.json) through the same PromQL parser, with
//     Grafana's variables put in as Grafana sends them ($__rate_interval a duration, $namespace
//     a regular expression).
//
// That they select metrics `meshlife serve` really exports is held by a Rust test against a
// running server (host-test/tests/it/serve_monitoring.rs).
//
// Usage: promcheck -rules FILE -dashboard FILE
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

func main() {
	rulesFile := flag.String("rules", "", "a Prometheus rule file")
	dashboardFile := flag.String("dashboard", "", "a Grafana dashboard (JSON model)")
	flag.Parse()
	if *rulesFile == "" || *dashboardFile == "" {
		fmt.Fprintln(os.Stderr, "usage: promcheck -rules FILE -dashboard FILE")
		os.Exit(2)
	}
	promql := parser.NewParser(parser.Options{})
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	failed := false

	groups, errs := rulefmt.ParseFile(*rulesFile, false, model.UTF8Validation, promql, logger)
	for _, err := range errs {
		fmt.Fprintf(os.Stderr, "FAIL %v\n", err)
		failed = true
	}
	if groups != nil {
		rules := 0
		seen := map[string]bool{}
		for _, group := range groups.Groups {
			for _, rule := range group.Rules {
				rules++
				key := rule.Alert + rule.Record + "\x00" + rule.Expr
				if seen[key] {
					fmt.Fprintf(os.Stderr, "FAIL %s: rule %s twice\n", *rulesFile, rule.Alert+rule.Record)
					failed = true
				}
				seen[key] = true
				if rule.Alert != "" && rule.Annotations["runbook_url"] == "" {
					fmt.Fprintf(os.Stderr, "FAIL %s: alert %s has no runbook_url\n", *rulesFile, rule.Alert)
					failed = true
				}
			}
		}
		if len(errs) == 0 {
			fmt.Printf("ok   %s: %d rules in %d groups (rulefmt.ParseFile, as promtool check rules)\n",
				*rulesFile, rules, len(groups.Groups))
		}
	}

	queries, err := dashboardQueries(*dashboardFile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL %s: %v\n", *dashboardFile, err)
		os.Exit(1)
	}
	grafana := strings.NewReplacer("$__rate_interval", "1m", "$namespace", ".*", "${namespace}", ".*")
	for _, query := range queries {
		if _, err := promql.ParseExpr(grafana.Replace(query.expr)); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL %s: panel %q: %v\n", *dashboardFile, query.panel, err)
			failed = true
		}
	}
	fmt.Printf("ok   %s: %d queries parsed\n", *dashboardFile, len(queries))

	if failed {
		os.Exit(1)
	}
}

type query struct{ panel, expr string }

// dashboardQueries: every target's expr of every panel (rows' panels too) and the templating
// variables' queries that are PromQL (label_values is Grafana's, not PromQL: left out).
func dashboardQueries(file string) ([]query, error) {
	text, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var dashboard struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(text, &dashboard); err != nil {
		return nil, err
	}
	var queries []query
	var walk func([]panel)
	walk = func(panels []panel) {
		for _, p := range panels {
			for _, target := range p.Targets {
				queries = append(queries, query{p.Title, target.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(dashboard.Panels)
	if len(queries) == 0 {
		return nil, fmt.Errorf("no queries")
	}
	return queries, nil
}

type panel struct {
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}
