package billingtest

import "github.com/switchboardhq/switchboard/billing/internal/payments"

func paymentsError(status int, typ, msg string) payments.APIError {
	return payments.APIError{Status: status, Type: typ, Message: msg}
}
