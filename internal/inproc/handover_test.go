package inproc

import (
	"context"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// payloads is a service of two unary methods that answer the same fresh
// payloads: one handed over, one copied.
const (
	methodHanded = "/test.Payloads/Handed"
	methodCopied = "/test.Payloads/Copied"
)

type payloads struct{ last *structpb.Struct }

func (p *payloads) answer() *structpb.Struct {
	p.last = &structpb.Struct{Fields: map[string]*structpb.Value{
		"body": structpb.NewStringValue("a large body"),
		"list": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewNumberValue(1)}}),
	}}
	return p.last
}

func payloadsDesc(p *payloads) *grpc.ServiceDesc {
	h := func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		if err := dec(new(wrapperspb.BytesValue)); err != nil {
			return nil, err
		}
		return p.answer(), nil
	}
	return &grpc.ServiceDesc{ServiceName: "test.Payloads", HandlerType: (*any)(nil), Methods: []grpc.MethodDesc{
		{MethodName: "Handed", Handler: h}, {MethodName: "Copied", Handler: h},
	}}
}

// A handed-over response reaches the caller whole with its fields shared;
// any other is a copy the caller owns alone.
func TestHandOverSharesTheResponse(t *testing.T) {
	p := &payloads{}
	c := New(nil)
	c.RegisterService(payloadsDesc(p), p)
	c.HandOver(methodHanded)
	ctx := context.Background()

	handed := new(structpb.Struct)
	require.NoError(t, c.Invoke(ctx, methodHanded, wrapperspb.Bytes([]byte("in")), handed))
	assert.Equal(t, "a large body", handed.GetFields()["body"].GetStringValue())
	assert.Len(t, handed.GetFields()["list"].GetListValue().GetValues(), 1)
	assert.Same(t, p.last.GetFields()["body"], handed.GetFields()["body"], "shared, not copied")

	copied := new(structpb.Struct)
	require.NoError(t, c.Invoke(ctx, methodCopied, wrapperspb.Bytes([]byte("in")), copied))
	assert.Equal(t, "a large body", copied.GetFields()["body"].GetStringValue())
	assert.NotSame(t, p.last.GetFields()["body"], copied.GetFields()["body"], "a copy")

	// Bytes fields are shared too.
	src := wrapperspb.Bytes([]byte("payload"))
	dst := new(wrapperspb.BytesValue)
	move(dst, src)
	assert.Equal(t, "payload", string(dst.GetValue()))
	assert.Equal(t, unsafe.SliceData(src.GetValue()), unsafe.SliceData(dst.GetValue()))
}
