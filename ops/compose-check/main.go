// compose-check loads a compose file the way `docker compose` does (compose-go: interpolation,
// normalisation, validation, every profile enabled) and prints what tests/contract/test_compose.py
// checks, as JSON: per service its image or build, healthcheck, volumes, published ports,
// depends_on conditions, profiles and environment, plus the named volumes.
//
//	compose-check [-env KEY=VALUE]... docker-compose.yml
//
// No container engine is needed. Interpolation sees only the -env values (not the caller's
// environment, not a .env file), so a test is not at the mercy of whoever runs it; env_file
// contents are not merged (the deployment's .env holds secrets and is not in the repository).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

type envFlag []string

func (e *envFlag) String() string { return strings.Join(*e, ",") }

func (e *envFlag) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	*e = append(*e, v)
	return nil
}

type build struct {
	Context    string `json:"context"`
	Dockerfile string `json:"dockerfile"`
}

type healthcheck struct {
	Test    []string `json:"test"`
	Disable bool     `json:"disable"`
}

type volume struct {
	Type           string `json:"type"`
	Source         string `json:"source"`
	Target         string `json:"target"`
	ReadOnly       bool   `json:"read_only"`
	CreateHostPath *bool  `json:"create_host_path"` // binds only; null: not a bind
}

type port struct {
	HostIP    string `json:"host_ip"`
	Published string `json:"published"`
	Target    uint32 `json:"target"`
}

type service struct {
	Image       string            `json:"image"`
	Build       *build            `json:"build"`
	Healthcheck *healthcheck      `json:"healthcheck"`
	Volumes     []volume          `json:"volumes"`
	Ports       []port            `json:"ports"`
	DependsOn   map[string]string `json:"depends_on"` // service -> condition
	Profiles    []string          `json:"profiles"`
	Environment map[string]string `json:"environment"` // the `environment:` key only
	EnvFiles    []string          `json:"env_files"`
}

type summary struct {
	Services map[string]service `json:"services"`
	Volumes  []string           `json:"volumes"`
}

func summarise(p *types.Project) summary {
	out := summary{Services: map[string]service{}, Volumes: []string{}}
	for name := range p.Volumes {
		out.Volumes = append(out.Volumes, name)
	}
	sort.Strings(out.Volumes)
	for name, s := range p.Services {
		svc := service{
			Image:       s.Image,
			Volumes:     []volume{},
			Ports:       []port{},
			DependsOn:   map[string]string{},
			Profiles:    append([]string{}, s.Profiles...),
			Environment: map[string]string{},
			EnvFiles:    []string{},
		}
		if s.Build != nil {
			svc.Build = &build{Context: s.Build.Context, Dockerfile: s.Build.Dockerfile}
		}
		if s.HealthCheck != nil {
			svc.Healthcheck = &healthcheck{Test: append([]string{}, s.HealthCheck.Test...), Disable: s.HealthCheck.Disable}
		}
		for _, v := range s.Volumes {
			vol := volume{Type: v.Type, Source: v.Source, Target: v.Target, ReadOnly: v.ReadOnly}
			if v.Type == types.VolumeTypeBind {
				create := v.Bind == nil || bool(v.Bind.CreateHostPath)
				vol.CreateHostPath = &create
			}
			svc.Volumes = append(svc.Volumes, vol)
		}
		for _, pt := range s.Ports {
			svc.Ports = append(svc.Ports, port{HostIP: pt.HostIP, Published: pt.Published, Target: pt.Target})
		}
		for dep, d := range s.DependsOn {
			svc.DependsOn[dep] = d.Condition
		}
		for k, v := range s.Environment {
			if v != nil {
				svc.Environment[k] = *v
			} else {
				svc.Environment[k] = ""
			}
		}
		for _, f := range s.EnvFiles {
			svc.EnvFiles = append(svc.EnvFiles, f.Path)
		}
		out.Services[name] = svc
	}
	return out
}

func main() {
	var env envFlag
	flag.Var(&env, "env", "KEY=VALUE for interpolation (repeatable)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: compose-check [-env KEY=VALUE]... docker-compose.yml")
		os.Exit(2)
	}
	file, err := filepath.Abs(flag.Arg(0))
	if err == nil {
		err = run(file, env)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "compose-check:", err)
		os.Exit(1)
	}
}

func run(file string, env []string) error {
	opts, err := cli.NewProjectOptions(
		[]string{file},
		cli.WithName("taskzilla"),
		cli.WithWorkingDirectory(filepath.Dir(file)),
		cli.WithEnv(env),
		cli.WithProfiles([]string{"*"}),
		cli.WithoutEnvironmentResolution,
	)
	if err != nil {
		return err
	}
	project, err := cli.ProjectFromOptions(context.Background(), opts)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(summarise(project))
}
