package grpcapi

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// Transcription options with more extra fields than core takes are refused
// with OpenAI's code and wording for an array too long.
func TestTranscriptionExtraFieldsBound(t *testing.T) {
	fields := func(n int) []*corev1.FormField {
		out := make([]*corev1.FormField, n)
		for i := range out {
			out[i] = &corev1.FormField{Name: "include[]", Value: "logprobs"}
		}
		return out
	}
	opts := &corev1.TranscribeOptions{Model: "m", Filename: "a.wav"}
	opts.ExtraFields = fields(contract.MaxTranscriptionExtraFields)
	require.NoError(t, validTranscription(opts, 10))

	opts.ExtraFields = fields(contract.MaxTranscriptionExtraFields + 6)
	err := validTranscription(opts, 10)
	st := status.Convert(err)
	assert.Equal(t, codes.InvalidArgument, st.Code())
	assert.Equal(t, "Invalid 'extra_fields': array too long. Expected an array with maximum length 64, but got an array with length 70 instead.", st.Message())
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	require.NotNil(t, info)
	assert.Equal(t, "array_above_max_length", info.GetReason())
	assert.Equal(t, "extra_fields", info.GetMetadata()[contract.MetaParam])
}
