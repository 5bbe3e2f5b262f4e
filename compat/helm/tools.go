//go:build tools

// The real Helm CLI, pinned by this module's go.sum: compat/helm/install.sh builds
// helm.sh/helm/v4/cmd/helm from it into compat/helm/bin/helm.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
