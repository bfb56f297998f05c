// Nonlinear least squares for the planner's fits (the energy model to profiles, its time part
// to published runs): Eigen's Levenberg-Marquardt (MINPACK's port) on a numerical Jacobian.
#pragma once

#include <Eigen/Core>
#include <unsupported/Eigen/NonLinearOptimization>
#include <unsupported/Eigen/NumericalDiff>

namespace perseus::planner {

// What Eigen asks of a residual functor, sized at run time. A functor derives from this and
// adds `int inputs() const`, `int values() const` and
// `int operator()(const Eigen::VectorXd& x, Eigen::VectorXd& residuals) const`.
struct DynamicResiduals {
  using Scalar = double;
  enum { InputsAtCompileTime = Eigen::Dynamic, ValuesAtCompileTime = Eigen::Dynamic };
  using InputType = Eigen::VectorXd;
  using ValueType = Eigen::VectorXd;
  using JacobianType = Eigen::MatrixXd;
};

// Minimises the sum of squared residuals from `x` (updated in place), forward-difference
// Jacobian; at most `max_evaluations` evaluations, as Eigen's LevenbergMarquardt counts them (maxfev).
template <typename Residuals>
void minimize_least_squares(const Residuals& residuals, Eigen::VectorXd& x, int max_evaluations, double xtol,
                            double ftol) {
  Eigen::NumericalDiff<Residuals> numeric(residuals);
  Eigen::LevenbergMarquardt<Eigen::NumericalDiff<Residuals>> lm(numeric);
  lm.parameters.maxfev = max_evaluations;
  lm.parameters.xtol = xtol;
  lm.parameters.ftol = ftol;
  lm.minimize(x);
}

}  // namespace perseus::planner
