package grpcapi

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/internal/provider"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// GetDisabledModels lists the machine's disabled models, all or one alias's.
func (a *Admin) GetDisabledModels(ctx context.Context, req *corev1.GetDisabledModelsRequest) (*corev1.GetDisabledModelsResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	out := &corev1.GetDisabledModelsResponse{Disabled: map[string]*structpb.ListValue{}, Ids: []string{}}
	e, ok := a.store.Disabled.Get(machineID)
	if !ok {
		return out, nil
	}
	for alias, ids := range e.Value.GetAliases() {
		if req.GetProviderAlias() != "" && alias != req.GetProviderAlias() {
			continue
		}
		list := &structpb.ListValue{}
		for _, id := range ids.GetIds() {
			list.Values = append(list.Values, structpb.NewStringValue(id))
		}
		out.Disabled[alias] = list
		if alias == req.GetProviderAlias() {
			out.Ids = ids.GetIds()
		}
	}
	return out, nil
}

// AddDisabledModels merges ids into an alias's disabled set.
func (a *Admin) AddDisabledModels(ctx context.Context, req *corev1.AddDisabledModelsRequest) (*corev1.AddDisabledModelsResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	if req.GetProviderAlias() == "" {
		return nil, missingParam("providerAlias")
	}
	if utf8.RuneCountInString(req.GetProviderAlias()) > maxModelIDLen {
		return nil, invalidParam("providerAlias", "invalid_value", fmt.Sprintf("'providerAlias' must be at most %d characters", maxModelIDLen))
	}
	if len(req.GetIds()) == 0 {
		return nil, missingParam("ids")
	}
	if err := validModelIDs("ids", req.GetIds(), maxDisabledModels, "disabled models per machine"); err != nil {
		return nil, err
	}
	err = a.modifyDisabled(ctx, machineID, func(d *busv1.DisabledModels) error {
		cur := d.Aliases[req.GetProviderAlias()]
		if cur == nil {
			cur = &busv1.ModelIDs{}
			d.Aliases[req.GetProviderAlias()] = cur
		}
		for _, id := range req.GetIds() {
			if !slices.Contains(cur.Ids, id) {
				cur.Ids = append(cur.Ids, id)
			}
		}
		n := 0
		for _, ids := range d.Aliases {
			n += len(ids.GetIds())
		}
		if n > maxDisabledModels {
			return tooMany("ids", maxDisabledModels, fmt.Sprintf("disabled models per machine (this would make %d)", n))
		}
		return nil
	})
	if err != nil {
		return nil, a.storeError(err)
	}
	return &corev1.AddDisabledModelsResponse{Success: true}, nil
}

// RemoveDisabledModels re-enables one id or a whole alias.
func (a *Admin) RemoveDisabledModels(ctx context.Context, req *corev1.RemoveDisabledModelsRequest) (*corev1.RemoveDisabledModelsResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	if req.GetProviderAlias() == "" {
		return nil, missingParam("providerAlias")
	}
	err = a.modifyDisabled(ctx, machineID, func(d *busv1.DisabledModels) error {
		if req.GetId() == "" {
			delete(d.Aliases, req.GetProviderAlias())
			return nil
		}
		if cur := d.Aliases[req.GetProviderAlias()]; cur != nil {
			cur.Ids = slices.DeleteFunc(cur.Ids, func(id string) bool { return id == req.GetId() })
			if len(cur.Ids) == 0 {
				delete(d.Aliases, req.GetProviderAlias())
			}
		}
		return nil
	})
	if err != nil {
		return nil, a.storeError(err)
	}
	return &corev1.RemoveDisabledModelsResponse{Success: true}, nil
}

func (a *Admin) modifyDisabled(ctx context.Context, machineID string, fn func(*busv1.DisabledModels) error) error {
	_, err := a.store.Disabled.Upsert(ctx, machineID, func(d *busv1.DisabledModels, _ bool) error {
		if d.Aliases == nil {
			d.Aliases = map[string]*busv1.ModelIDs{}
		}
		return fn(d)
	})
	return err
}

var modelNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,199}$`)

// GetAliases returns the machine's model aliases.
func (a *Admin) GetAliases(ctx context.Context, _ *corev1.GetAliasesRequest) (*corev1.GetAliasesResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for k, v := range a.store.MachineSettings(machineID).GetAliases() {
		out[k] = v
	}
	return &corev1.GetAliasesResponse{Aliases: out}, nil
}

// PutAliases replaces the machine's model aliases.
func (a *Admin) PutAliases(ctx context.Context, req *corev1.PutAliasesRequest) (*corev1.PutAliasesResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	if len(req.GetAliases()) > maxAliases {
		return nil, tooMany("aliases", maxAliases, "aliases per machine")
	}
	for name, target := range req.GetAliases() {
		if !modelNamePattern.MatchString(name) || !modelNamePattern.MatchString(target) {
			return nil, invalidParam("aliases", "invalid_value", fmt.Sprintf("alias %q -> %q: names and targets are model ids", name, target))
		}
		if reservedModelName(name) {
			return nil, invalidParam("aliases", "invalid_value", reservedMessage("alias", name))
		}
	}
	if cycle := aliasCycle(req.GetAliases()); cycle != nil {
		return nil, invalidParam("aliases", "alias_cycle", "alias cycle: "+strings.Join(cycle, " -> "))
	}
	if chain := longAliasChain(req.GetAliases()); chain != nil {
		return nil, invalidParam("aliases", "invalid_value", fmt.Sprintf("alias chain longer than %d aliases: %s",
			routing.MaxAliasDepth, strings.Join(chain, " -> ")))
	}
	settings := a.store.MachineSettings(machineID)
	if outer, model, inner := comboInCombo(settings.GetCombos(), req.GetAliases(), settings.GetAliases(), true); outer != "" {
		return nil, invalidParam("aliases", "invalid_value", fmt.Sprintf("combo %q names %q, which these aliases lead to the combo %q; a combo's models are aliases or models, never combos",
			outer, model, inner))
	}
	if err := a.modifySettings(ctx, machineID, func(s *busv1.Settings) { s.Aliases = req.GetAliases() }); err != nil {
		return nil, a.storeError(err)
	}
	return &corev1.PutAliasesResponse{Aliases: req.GetAliases()}, nil
}

// comboInCombo returns a combo (outer) one of whose models names a combo
// (inner), itself or through aliases followed as the router follows them,
// or empty names when none does. The router serves a combo's models as
// models, so a combo inside another would never be served. When aliases
// replace before (changed true), a model that named a combo through those
// already (a combo stored before combos were checked) is left out: the
// change did not make it.
func comboInCombo(combos []*busv1.Combo, aliases, before map[string]string, changed bool) (outer, model, inner string) {
	names := comboNames(combos)
	for _, c := range combos {
		for _, m := range c.GetModels() {
			if in := comboOf(names, aliases, m); in != "" && !(changed && comboOf(names, before, m) != "") {
				return c.GetName(), m, in
			}
		}
	}
	return "", "", ""
}

func comboNames(combos []*busv1.Combo) map[string]bool {
	names := map[string]bool{}
	for _, c := range combos {
		names[c.GetName()] = true
	}
	return names
}

// comboOf returns the combo a model names, itself or through the aliases
// the router follows, or "".
func comboOf(names map[string]bool, aliases map[string]string, model string) string {
	name := model
	for step := 0; ; step++ {
		if names[name] {
			return name
		}
		target, ok := aliases[name]
		if !ok || step == routing.MaxAliasDepth {
			return ""
		}
		name = target
	}
}

// maxCycleNames bounds the names an alias cycle's error lists.
const maxCycleNames = 10

// longAliasChain returns a chain of aliases (the names, then the model it
// ends in) the router would not follow to its end, longer than
// routing.MaxAliasDepth aliases, or nil. The aliases form no cycle
// (aliasCycle).
func longAliasChain(aliases map[string]string) []string {
	for _, start := range slices.Sorted(maps.Keys(aliases)) {
		chain := []string{start}
		for name := start; ; {
			target, ok := aliases[name]
			if !ok {
				break
			}
			chain = append(chain, target)
			name = target
		}
		if len(chain)-1 > routing.MaxAliasDepth {
			return chain
		}
	}
	return nil
}

// aliasCycle returns the names along a cycle the aliases form, the first
// name again at the end ("a", "b", "a"; "a", "a" for an alias naming
// itself), or nil when every chain of aliases ends in a model. The names
// are walked in order, so the same aliases name the same cycle. A long
// cycle is cut to its first names, "...", and the name it returns to.
func aliasCycle(aliases map[string]string) []string {
	ended := map[string]bool{}
	for _, start := range slices.Sorted(maps.Keys(aliases)) {
		var path []string
		at := map[string]int{}
		for name := start; !ended[name]; {
			if i, ok := at[name]; ok {
				cycle := append(path[i:], name)
				if len(cycle) > maxCycleNames {
					cycle = append(cycle[:maxCycleNames-2:maxCycleNames-2], "...", name)
				}
				return cycle
			}
			target, ok := aliases[name]
			if !ok {
				break
			}
			at[name] = len(path)
			path = append(path, name)
			name = target
		}
		for _, name := range path {
			ended[name] = true
		}
	}
	return nil
}

// GetCombos returns the machine's combos.
func (a *Admin) GetCombos(ctx context.Context, _ *corev1.GetCombosRequest) (*corev1.GetCombosResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	out := &corev1.GetCombosResponse{Combos: []*corev1.Combo{}}
	for _, c := range a.store.MachineSettings(machineID).GetCombos() {
		out.Combos = append(out.Combos, &corev1.Combo{Name: c.GetName(), Models: c.GetModels()})
	}
	return out, nil
}

// reservedModelName reports a name GET /v1/models/{name} answers with
// something else than the model of that name: a kind's listing, or
// /v1/models/info. An alias or combo so named could never be retrieved.
func reservedModelName(name string) bool {
	return name == "info" || provider.ValidKind(name)
}

func reservedMessage(what, name string) string {
	route := "the listing of models of that kind"
	if name == "info" {
		route = "model info"
	}
	return fmt.Sprintf("%s name %q is reserved: GET /v1/models/%s answers %s", what, name, name, route)
}

// PutCombos replaces the machine's combos.
func (a *Admin) PutCombos(ctx context.Context, req *corev1.PutCombosRequest) (*corev1.PutCombosResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	if len(req.GetCombos()) > maxCombos {
		return nil, tooMany("combos", maxCombos, "combos per machine")
	}
	seen := map[string]bool{}
	combos := make([]*busv1.Combo, 0, len(req.GetCombos()))
	for _, c := range req.GetCombos() {
		if !modelNamePattern.MatchString(c.GetName()) {
			return nil, invalidParam("combos", "invalid_value", fmt.Sprintf("combo name %q is not a model id", c.GetName()))
		}
		if reservedModelName(c.GetName()) {
			return nil, invalidParam("combos", "invalid_value", reservedMessage("combo", c.GetName()))
		}
		if seen[c.GetName()] {
			return nil, invalidParam("combos", "invalid_value", fmt.Sprintf("combo %q is named twice", c.GetName()))
		}
		seen[c.GetName()] = true
		if len(c.GetModels()) == 0 {
			return nil, invalidParam("combos", "invalid_value", fmt.Sprintf("combo %q has no models", c.GetName()))
		}
		if len(c.GetModels()) > maxComboModels {
			return nil, invalidParam("combos", "invalid_value", fmt.Sprintf("combo %q: at most %d models", c.GetName(), maxComboModels))
		}
		for _, m := range c.GetModels() {
			if !modelNamePattern.MatchString(m) || m == c.GetName() {
				return nil, invalidParam("combos", "invalid_value", fmt.Sprintf("combo %q: %q is not a usable model id", c.GetName(), m))
			}
		}
		combos = append(combos, &busv1.Combo{Name: c.GetName(), Models: c.GetModels()})
	}
	if outer, model, inner := comboInCombo(combos, a.store.MachineSettings(machineID).GetAliases(), nil, false); outer != "" {
		what := fmt.Sprintf("%q is a combo", model)
		if model != inner {
			what = fmt.Sprintf("%q leads to the combo %q", model, inner)
		}
		return nil, invalidParam("combos", "invalid_value", fmt.Sprintf("combo %q: %s; a combo's models are aliases or models, never combos", outer, what))
	}
	if err := a.modifySettings(ctx, machineID, func(s *busv1.Settings) { s.Combos = combos }); err != nil {
		return nil, a.storeError(err)
	}
	return &corev1.PutCombosResponse{Combos: req.GetCombos()}, nil
}

func (a *Admin) modifySettings(ctx context.Context, machineID string, fn func(*busv1.Settings)) error {
	_, err := a.store.Settings.Upsert(ctx, machineID, func(s *busv1.Settings, _ bool) error {
		fn(s)
		return nil
	})
	return err
}

// ListConnectionModels fetches a connection's model list from its upstream
// now (through a worker, so proxy and credentials apply as everywhere).
func (a *Admin) ListConnectionModels(ctx context.Context, req *corev1.ListConnectionModelsRequest) (*corev1.ListConnectionModelsResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	e, err := a.connection(ctx, machineID, req.GetId())
	if err != nil {
		return nil, err
	}
	c := e.Value
	spec, ok := a.registry.Lookup(c.GetProvider())
	if !ok || !spec.Listing {
		return nil, invalidParam("id", "no_model_listing", fmt.Sprintf("provider '%s' has no model listing", c.GetProvider()))
	}
	cat, ok := a.lister.Refresh(ctx, c)
	if !ok {
		return nil, statusError(codes.DeadlineExceeded, "upstream_timeout", "the upstream did not list its models in time",
			MetaHTTPStatus, strconv.Itoa(http.StatusGatewayTimeout))
	}
	if cat.GetError() != "" {
		st := int(cat.GetStatus())
		if st < 400 {
			st = http.StatusBadGateway
		}
		return nil, statusError(codeForHTTP(st), "upstream_error", "listing the upstream's models failed: "+cat.GetError(),
			MetaHTTPStatus, strconv.Itoa(st))
	}
	out := &corev1.ListConnectionModelsResponse{Provider: c.GetProvider(), ConnectionId: c.GetId(), Models: []*corev1.ConnectionModel{}}
	for _, m := range cat.GetModels() {
		out.Models = append(out.Models, &corev1.ConnectionModel{Id: m.GetId(), Name: m.GetName(), Kind: provider.KindOf(m.GetKind(), m.GetType(), m.GetId())})
	}
	return out, nil
}
