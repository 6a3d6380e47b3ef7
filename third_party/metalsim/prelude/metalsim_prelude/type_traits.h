// MSL's <metal_type_traits> and <metal_array>: metal::is_floating_point_v & co (which
// count half and bfloat, unlike std's), the vector traits, and metal::array.
//
// Needs scalar_types.h and vector_types.h. std's traits are taken as they are wherever
// MSL's mean the same; the arithmetic categories are MSL's own.
#pragma once

namespace metal {

using std::add_const;
using std::add_const_t;
using std::add_cv;
using std::add_cv_t;
using std::add_pointer;
using std::add_pointer_t;
using std::add_volatile;
using std::add_volatile_t;
using std::bool_constant;
using std::conditional;
using std::conditional_t;
using std::conjunction;
using std::conjunction_v;
using std::decay;
using std::decay_t;
using std::declval;
using std::disjunction;
using std::disjunction_v;
using std::enable_if;
using std::enable_if_t;
using std::false_type;
using std::integral_constant;
using std::is_base_of;
using std::is_base_of_v;
using std::is_class;
using std::is_class_v;
using std::is_const;
using std::is_const_v;
using std::is_convertible;
using std::is_convertible_v;
using std::is_enum;
using std::is_enum_v;
using std::is_pointer;
using std::is_pointer_v;
using std::is_reference;
using std::is_reference_v;
using std::is_same;
using std::is_same_v;
using std::is_trivially_copyable;
using std::is_trivially_copyable_v;
using std::is_union;
using std::is_union_v;
using std::is_void;
using std::is_void_v;
using std::is_volatile;
using std::is_volatile_v;
using std::negation;
using std::negation_v;
using std::remove_all_extents;
using std::remove_all_extents_t;
using std::remove_const;
using std::remove_const_t;
using std::remove_cv;
using std::remove_cv_t;
using std::remove_extent;
using std::remove_extent_t;
using std::remove_pointer;
using std::remove_pointer_t;
using std::remove_reference;
using std::remove_reference_t;
using std::remove_volatile;
using std::remove_volatile_t;
using std::true_type;
using std::underlying_type;
using std::underlying_type_t;

// Arithmetic categories as MSL has them: half and bfloat are floating-point scalars.
template <class T>
struct is_floating_point
    : bool_constant<std::is_floating_point_v<remove_cv_t<T>> || is_same_v<remove_cv_t<T>, half> ||
                    is_same_v<remove_cv_t<T>, bfloat>> {};
template <class T>
struct is_integral : std::is_integral<T> {};
template <class T>
struct is_arithmetic : bool_constant<is_integral<T>::value || is_floating_point<T>::value> {};
template <class T>
struct is_signed : bool_constant<is_floating_point<T>::value || std::is_signed_v<T>> {};
template <class T>
struct is_unsigned : bool_constant<is_integral<T>::value && !std::is_signed_v<T>> {};
// MSL: a scalar is an arithmetic type (std's is_scalar also counts pointers and enums).
template <class T>
struct is_scalar : is_arithmetic<T> {};
template <class T>
struct is_vector : detail::is_vec<remove_cv_t<T>> {};
template <class T>
struct is_fundamental : bool_constant<is_arithmetic<T>::value || is_void_v<T>> {};

template <class T>
inline constexpr bool is_floating_point_v = is_floating_point<T>::value;
template <class T>
inline constexpr bool is_integral_v = is_integral<T>::value;
template <class T>
inline constexpr bool is_arithmetic_v = is_arithmetic<T>::value;
template <class T>
inline constexpr bool is_signed_v = is_signed<T>::value;
template <class T>
inline constexpr bool is_unsigned_v = is_unsigned<T>::value;
template <class T>
inline constexpr bool is_scalar_v = is_scalar<T>::value;
template <class T>
inline constexpr bool is_vector_v = is_vector<T>::value;
template <class T>
inline constexpr bool is_fundamental_v = is_fundamental<T>::value;

// vec_elements<float4>::value == 4 (1 for a scalar); make_scalar<float4>::type == float.
template <class T>
struct vec_elements : integral_constant<int, 1> {};
template <class T, int N>
struct vec_elements<vec<T, N>> : integral_constant<int, N> {};
template <class T>
inline constexpr int vec_elements_v = vec_elements<remove_cv_t<T>>::value;
template <class T>
struct make_scalar {
  using type = T;
};
template <class T, int N>
struct make_scalar<vec<T, N>> {
  using type = T;
};
template <class T>
using make_scalar_t = typename make_scalar<remove_cv_t<T>>::type;

template <class T>
struct make_signed : std::make_signed<T> {};
template <class T, int N>
struct make_signed<vec<T, N>> {
  using type = vec<typename std::make_signed<T>::type, N>;
};
template <class T>
using make_signed_t = typename make_signed<T>::type;
template <class T>
struct make_unsigned : std::make_unsigned<T> {};
template <class T, int N>
struct make_unsigned<vec<T, N>> {
  using type = vec<typename std::make_unsigned<T>::type, N>;
};
template <class T>
using make_unsigned_t = typename make_unsigned<T>::type;

// metal::array<T, N>: a fixed-size array with size() and bounds-free operator[].
template <class T, size_t N>
struct array {
  T elems_[N ? N : 1];
  using value_type = T;
  using size_type = size_t;
  constexpr size_t size() const noexcept { return N; }
  constexpr bool empty() const noexcept { return N == 0; }
  constexpr T& operator[](size_t i) noexcept { return elems_[i]; }
  constexpr const T& operator[](size_t i) const noexcept { return elems_[i]; }
  constexpr T* data() noexcept { return elems_; }
  constexpr const T* data() const noexcept { return elems_; }
  constexpr T* begin() noexcept { return elems_; }
  constexpr T* end() noexcept { return elems_ + N; }
  constexpr const T* begin() const noexcept { return elems_; }
  constexpr const T* end() const noexcept { return elems_ + N; }
  constexpr T& front() noexcept { return elems_[0]; }
  constexpr T& back() noexcept { return elems_[N - 1]; }
};

// metal::array_ref<T>: a view of contiguous elements (pointer and count).
template <class T>
struct array_ref {
  const T* ptr_ = nullptr;
  size_t size_ = 0;
  constexpr array_ref() = default;
  constexpr array_ref(const T* p, size_t n) noexcept : ptr_(p), size_(n) {}
  template <size_t N>
  constexpr array_ref(const array<T, N>& a) noexcept : ptr_(a.data()), size_(N) {}
  template <size_t N>
  constexpr array_ref(const T (&a)[N]) noexcept : ptr_(a), size_(N) {}
  constexpr size_t size() const noexcept { return size_; }
  constexpr const T& operator[](size_t i) const noexcept { return ptr_[i]; }
  constexpr const T* data() const noexcept { return ptr_; }
  constexpr const T* begin() const noexcept { return ptr_; }
  constexpr const T* end() const noexcept { return ptr_ + size_; }
};

}  // namespace metal
