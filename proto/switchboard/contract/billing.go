package contract

// BillingErrorDomain is the errdetails.ErrorInfo domain of billing's
// errors; their metadata MetaHTTPStatus is the HTTP status a front end
// should show, and MetaParam, on an invalid argument, the request
// parameter at fault.
const BillingErrorDomain = "switchboard.billing"
