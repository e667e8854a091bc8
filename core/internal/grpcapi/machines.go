package grpcapi

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/core/internal/apikey"
	"github.com/switchboardhq/switchboard/internal/kvmirror"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

func machineView(m *busv1.Machine) *corev1.Machine {
	return &corev1.Machine{Id: m.GetId(), Name: m.GetName(), IsDefault: m.GetIsDefault(), CreatedAt: m.GetCreatedAt()}
}

// CreateMachine adds a tenant.
func (a *Admin) CreateMachine(ctx context.Context, req *corev1.CreateMachineRequest) (*corev1.CreateMachineResponse, error) {
	if _, err := a.auth.Admin(ctx); err != nil {
		return nil, err
	}
	if err := validName("name", req.GetName()); err != nil {
		return nil, err
	}
	for range 8 {
		id, err := apikey.NewMachineID()
		if err != nil {
			return nil, internal("generate machine id")
		}
		m := &busv1.Machine{Id: id, Name: req.GetName(), CreatedAt: timestamppb.New(a.now())}
		err = a.store.Machines.Create(ctx, id, m)
		if errors.Is(err, kvmirror.ErrExists) {
			continue
		}
		if err != nil {
			return nil, a.storeError(err)
		}
		if err := a.store.Settings.Create(ctx, id, &busv1.Settings{}); err != nil && !errors.Is(err, kvmirror.ErrExists) {
			return nil, a.storeError(err)
		}
		a.log.Info("machine created", "machine", id)
		created(ctx)
		return &corev1.CreateMachineResponse{Machine: machineView(m)}, nil
	}
	return nil, internal("could not allocate a unique machine id")
}

// ListMachines lists every tenant.
func (a *Admin) ListMachines(ctx context.Context, _ *corev1.ListMachinesRequest) (*corev1.ListMachinesResponse, error) {
	if _, err := a.auth.Admin(ctx); err != nil {
		return nil, err
	}
	out := &corev1.ListMachinesResponse{Machines: []*corev1.Machine{}}
	a.store.Machines.Range(func(key string, e kvmirror.Entry[*busv1.Machine]) bool {
		if key != e.Value.GetId() {
			return true // the default machine's pointer
		}
		out.Machines = append(out.Machines, machineView(e.Value))
		return true
	})
	slices.SortFunc(out.Machines, func(x, y *corev1.Machine) int {
		return cmp.Or(x.GetCreatedAt().AsTime().Compare(y.GetCreatedAt().AsTime()), cmp.Compare(x.GetId(), y.GetId()))
	})
	return out, nil
}

func sortKeys(keys []*corev1.APIKey) {
	slices.SortFunc(keys, func(x, y *corev1.APIKey) int {
		return cmp.Or(x.GetCreatedAt().AsTime().Compare(y.GetCreatedAt().AsTime()), cmp.Compare(x.GetId(), y.GetId()))
	})
}
