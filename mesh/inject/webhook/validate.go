package webhook

import (
	"errors"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	spv1alpha2 "github.com/weftmesh/weft/apis/serviceprofile/v1alpha2"
	"github.com/weftmesh/weft/mesh/discovery"
	"github.com/weftmesh/weft/mesh/policy"
)

// Validate checks a decoded ServiceProfile, policy.linkerd.io resource or
// Gateway API route beyond what its CRD schema expresses, with the very
// translation the controllers apply to it: discovery.TranslateServiceProfile
// for ServiceProfiles, policy.Validate for the policy kinds and routes. An
// object Validate refuses is one the destination or policy controller
// would ignore, with the same messages, whether it came through the API
// server or a static file; one it accepts, they use. It returns every
// problem as a field error; objects of other kinds yield nil. It is a pure
// function: checks that need other objects (two Servers selecting the same
// port, a reference to a missing object) are not made here.
func Validate(obj runtime.Object) field.ErrorList {
	if sp, ok := obj.(*spv1alpha2.ServiceProfile); ok {
		_, err := discovery.TranslateServiceProfile(sp)
		var errs field.ErrorList
		for _, e := range flatten(err) {
			var pe *discovery.ProfileError
			if errors.As(e, &pe) {
				errs = append(errs, fieldError(pe.Field, pe.Message))
			} else if e != nil {
				errs = append(errs, fieldError("", e.Error()))
			}
		}
		return errs
	}
	var errs field.ErrorList
	for _, p := range policy.Validate(obj, nil) {
		errs = append(errs, fieldError(p.Field, p.Message))
	}
	return errs
}

// fieldError is an invalid field whose value the message already quotes.
func fieldError(path, msg string) *field.Error {
	if path == "" {
		path = "spec"
	}
	return &field.Error{Type: field.ErrorTypeInvalid, Field: path, BadValue: field.OmitValueType{}, Detail: msg}
}
