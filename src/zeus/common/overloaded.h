// std::visit over a variant with one lambda per alternative: Overloaded{[](const A&) {...}, ...}.
#pragma once

namespace zeus {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace zeus
