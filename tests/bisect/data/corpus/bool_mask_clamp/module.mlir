module @jit_step attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<5xf32>) -> (tensor<5xi1> {jax.result_info = "result[0]"}, tensor<f32> {jax.result_info = "result[1]"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<5xf32>
    %1 = stablehlo.compare GT, %arg0, %0, FLOAT : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xi1>
    %c = stablehlo.constant dense<false> : tensor<i1>
    %c_0 = stablehlo.constant dense<true> : tensor<i1>
    %2 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i1>) -> tensor<5xi1>
    %3 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i1>) -> tensor<5xi1>
    %4 = stablehlo.clamp %2, %1, %3 : tensor<5xi1>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %5 = call @_where(%4, %arg0, %c_1) : (tensor<5xi1>, tensor<5xf32>, tensor<i32>) -> tensor<5xf32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %6 = stablehlo.reduce(%5 init: %cst_2) applies stablehlo.add across dimensions = [0] : (tensor<5xf32>, tensor<f32>) -> tensor<f32>
    %7 = stablehlo.convert %4 : (tensor<5xi1>) -> tensor<5xi32>
    %c_3 = stablehlo.constant dense<0> : tensor<i32>
    %8 = stablehlo.reduce(%7 init: %c_3) applies stablehlo.add across dimensions = [0] : (tensor<5xi32>, tensor<i32>) -> tensor<i32>
    %c_4 = stablehlo.constant dense<1> : tensor<i32>
    %9 = stablehlo.maximum %8, %c_4 : tensor<i32>
    %10 = stablehlo.convert %9 : (tensor<i32>) -> tensor<f32>
    %11 = stablehlo.divide %6, %10 : tensor<f32>
    return %4, %11 : tensor<5xi1>, tensor<f32>
  }
  func.func private @_where(%arg0: tensor<5xi1>, %arg1: tensor<5xf32>, %arg2: tensor<i32>) -> tensor<5xf32> {
    %0 = stablehlo.convert %arg2 : (tensor<i32>) -> tensor<f32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<5xf32>
    %2 = stablehlo.select %arg0, %arg1, %1 : tensor<5xi1>, tensor<5xf32>
    return %2 : tensor<5xf32>
  }
}
