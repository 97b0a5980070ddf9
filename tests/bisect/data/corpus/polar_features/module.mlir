module @jit_step attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x2xf32>, %arg1: tensor<4x6xf32>) -> (tensor<4x6xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.multiply %arg0, %arg0 : tensor<4x2xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.reduce(%0 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<4x2xf32>, tensor<f32>) -> tensor<4xf32>
    %2 = stablehlo.sqrt %1 : tensor<4xf32>
    %3 = stablehlo.slice %arg0 [0:4, 1:2] : (tensor<4x2xf32>) -> tensor<4x1xf32>
    %4 = stablehlo.reshape %3 : (tensor<4x1xf32>) -> tensor<4xf32>
    %5 = stablehlo.slice %arg0 [0:4, 0:1] : (tensor<4x2xf32>) -> tensor<4x1xf32>
    %6 = stablehlo.reshape %5 : (tensor<4x1xf32>) -> tensor<4xf32>
    %7 = stablehlo.atan2 %4, %6 : tensor<4xf32>
    %8 = stablehlo.cosine %7 : tensor<4xf32>
    %9 = stablehlo.sine %7 : tensor<4xf32>
    %10 = stablehlo.broadcast_in_dim %2, dims = [0] : (tensor<4xf32>) -> tensor<4x1xf32>
    %11 = stablehlo.broadcast_in_dim %8, dims = [0] : (tensor<4xf32>) -> tensor<4x1xf32>
    %12 = stablehlo.broadcast_in_dim %9, dims = [0] : (tensor<4xf32>) -> tensor<4x1xf32>
    %13 = stablehlo.broadcast_in_dim %7, dims = [0] : (tensor<4xf32>) -> tensor<4x1xf32>
    %14 = stablehlo.concatenate %10, %11, %12, %13, dim = 1 : (tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x1xf32>) -> tensor<4x4xf32>
    %15 = stablehlo.dot_general %14, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<4x4xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
    %16 = stablehlo.tanh %15 : tensor<4x6xf32>
    return %16 : tensor<4x6xf32>
  }
}
