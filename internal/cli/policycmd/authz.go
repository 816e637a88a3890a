package policycmd

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/weftmesh/weft/mesh/policy"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// AuthzCommand is `weft authz --manifests PATH WORKLOAD`: it lists the
// servers, routes and authorizations that apply to each port of a
// workload, read from manifests.
func AuthzCommand() Command {
	return Command{
		Name:    "authz",
		Summary: "list the authorization policies that apply to a workload",
		Args:    "--manifests PATH [flags] KIND/NAME",
		Setup:   setupAuthz,
	}
}

type authzRow struct {
	Port          uint16   `json:"port"`
	PortName      string   `json:"portName,omitempty"`
	Server        string   `json:"server"`
	Protocol      string   `json:"protocol"`
	Route         string   `json:"route,omitempty"`
	Authorization string   `json:"authorization"`
	Clients       string   `json:"clients"`
	Networks      []string `json:"networks"`
	Audit         bool     `json:"audit,omitempty"`
}

func setupAuthz(fs *FlagSet) Action {
	var f policyFlags
	f.register(fs)
	ns := fs.StringP("namespace", "n", "default", "namespace of the workload")
	return func(_ context.Context, args []string, stdio IO) int {
		positional := args
		fail := func(err error) int {
			fmt.Fprintf(stdio.Stderr, "weft authz: %v\n", err)
			return ExitUsage
		}
		if len(positional) != 1 {
			return fail(fmt.Errorf("want exactly one workload (KIND/NAME, such as deployment/web), got %d", len(positional)))
		}
		if err := f.validate(); err != nil {
			return fail(err)
		}
		ref, err := policy.ParseKindName(positional[0], *ns)
		if err != nil {
			return fail(err)
		}
		ix, err := loadPolicyIndex(&f)
		if err != nil {
			return fail(err)
		}
		info, err := ix.Describe(ref)
		if err != nil {
			return fail(err)
		}
		var rows []authzRow
		for _, p := range info.Ports {
			rows = append(rows, portRows(p)...)
		}
		if f.output == "json" || f.output == "yaml" {
			out := struct {
				Workload      string     `json:"workload"`
				Namespace     string     `json:"namespace"`
				Meshed        string     `json:"meshed"`
				DefaultPolicy string     `json:"defaultPolicy"`
				Rows          []authzRow `json:"authorizations"`
				Warnings      []string   `json:"warnings"`
			}{ref.Kind + "/" + ref.Name, ref.Namespace, meshedString(info.Meshed), info.DefaultPolicy.String(), rows, warnings(ix)}
			if out.Rows == nil {
				out.Rows = []authzRow{}
			}
			if out.Warnings == nil {
				out.Warnings = []string{}
			}
			_ = writeObject(stdio.Stdout, f.output, out)
			return ExitOK
		}
		for _, w := range warnings(ix) {
			fmt.Fprintln(stdio.Stderr, w)
		}
		w := info.Workload
		fmt.Fprintf(stdio.Stdout, "%s %s/%s (service account %s): %s (%s)\n", w.Kind, w.Namespace, w.Name, w.ServiceAccount, meshedString(info.Meshed), info.MeshedWhy)
		fmt.Fprintf(stdio.Stdout, "default policy for other ports: %s (from %s)\n\n", info.DefaultPolicy, info.DefaultFrom)
		tw := tabwriter.NewWriter(stdio.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PORT\tSERVER\tPROTOCOL\tROUTE\tAUTHORIZATION\tCLIENTS\tNETWORKS")
		for _, r := range rows {
			port := fmt.Sprint(r.Port)
			if r.PortName != "" {
				port += "/" + r.PortName
			}
			route := r.Route
			if route == "" {
				route = "-"
			}
			auth := r.Authorization
			if r.Audit {
				auth += " (audit)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", port, r.Server, r.Protocol, route, auth, r.Clients, strings.Join(r.Networks, ", "))
		}
		_ = tw.Flush()
		return ExitOK
	}
}

func meshedString(m policy.Meshed) string {
	switch m {
	case policy.MeshedYes:
		return "meshed"
	case policy.MeshedNo:
		return "not meshed (policy is not enforced)"
	}
	return "mesh status unknown"
}

func portRows(p policy.PortInfo) []authzRow {
	s := p.Server
	base := authzRow{Port: p.Port, PortName: p.Name, Server: s.Meta.String(), Protocol: s.Protocol.String()}
	row := func(route string, a *authz.Authorization) authzRow {
		r := base
		r.Route = route
		if a == nil {
			r.Authorization, r.Clients, r.Networks = "(none: denied)", "-", []string{}
			return r
		}
		r.Authorization = a.Meta.String()
		r.Clients = a.Authentication.String()
		r.Audit = a.Audit
		for _, n := range a.Networks {
			r.Networks = append(r.Networks, n.String())
		}
		return r
	}
	var rows []authzRow
	serverRows := func(route string) {
		for i := range s.Authorizations {
			rows = append(rows, row(route, &s.Authorizations[i]))
		}
	}
	routes := 0
	if s.Protocol == authz.ProtocolGRPC {
		for i := range s.GRPCRoutes {
			r := &s.GRPCRoutes[i]
			routes++
			for j := range r.Authorizations {
				rows = append(rows, row(r.Meta.String(), &r.Authorizations[j]))
			}
			serverRows(r.Meta.String())
			if len(r.Authorizations) == 0 && len(s.Authorizations) == 0 {
				rows = append(rows, row(r.Meta.String(), nil))
			}
		}
	} else if s.Protocol.IsHTTP() {
		for i := range s.HTTPRoutes {
			r := &s.HTTPRoutes[i]
			routes++
			for j := range r.Authorizations {
				rows = append(rows, row(r.Meta.String(), &r.Authorizations[j]))
			}
			serverRows(r.Meta.String())
			if len(r.Authorizations) == 0 && len(s.Authorizations) == 0 {
				rows = append(rows, row(r.Meta.String(), nil))
			}
		}
	}
	if routes == 0 {
		serverRows("")
		if len(s.Authorizations) == 0 {
			rows = append(rows, row("", nil))
		}
	}
	return rows
}
