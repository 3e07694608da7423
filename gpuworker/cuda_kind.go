package gpuworker

// KindCUDA is the name the cuda backend registers under (cuda.go, built
// with the tag cuda). It is declared in every build, so that code can name
// the backend whether or not this build has it; without the tag a
// BackendConfig of this Kind fails with a *BackendNotBuiltInError.
const KindCUDA = "cuda"
