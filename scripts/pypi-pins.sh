# The PyPI build tools of the Python package and of the wheels, pinned in one place: sourced by
# scripts/install-python.sh and scripts/wheels/build-wheels.sh, which must build the extension
# with the same pybind11 (its ABI tag is in the module's name). PyTorch's own pin is in
# scripts/install-torch.sh.
readonly kPybind11Pin="3.1.0"
readonly kScikitBuildCorePin="1.1.2"
readonly kPytestPin="9.2.0"
readonly kZiglangPin="0.17.0"
readonly kAuditwheelPin="6.8.2"
readonly kPatchelfPin="0.19.3.0"
