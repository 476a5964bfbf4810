! SPDX-License-Identifier: Apache-2.0
!
! Assembly of the global load vector and the diagonal of the stiffness
! matrix of a 1-D bar discretised with linear finite elements, followed by
! a Jacobi-preconditioned residual check.
!
! The mesh module stores node coordinates and the element connectivity
! table conn(1:2, e). The element loop computes the element length, the
! element stiffness and the consistent load of a distributed force, and
! adds the element contributions to the two nodes of the element through
! the connectivity table.
module bar_mesh
  implicit none
  integer, parameter :: dp = kind(1.0d0)
  integer :: nelem, nnode
  integer, allocatable :: conn(:, :)
  real(dp), allocatable :: xnode(:), area(:)
contains
  subroutine make_mesh(ne, length)
    integer, intent(in) :: ne
    real(dp), intent(in) :: length
    integer :: e, k
    nelem = ne
    nnode = ne + 1
    allocate(conn(2, nelem), xnode(nnode), area(nelem))
    do k = 1, nnode
      xnode(k) = length * real(k - 1, dp) / real(nelem, dp)
    end do
    do e = 1, nelem
      conn(1, e) = e
      conn(2, e) = e + 1
      area(e) = 1.0_dp + 0.5_dp * real(e, dp) / real(nelem, dp)
    end do
  end subroutine make_mesh

  subroutine free_mesh()
    deallocate(conn, xnode, area)
  end subroutine free_mesh
end module bar_mesh

module bar_assembly
  use bar_mesh
  implicit none
contains
  pure function body_force(x) result(f)
    real(dp), intent(in) :: x
    real(dp) :: f
    f = 1.0_dp + 0.1_dp * x
  end function body_force

  subroutine assemble(youngs, kdiag, fload)
    real(dp), intent(in) :: youngs
    real(dp), intent(out) :: kdiag(:), fload(:)
    integer :: e, n1, n2
    real(dp) :: he, ke, fe, xm

    kdiag = 0.0_dp
    fload = 0.0_dp
    !$omp parallel do private(n1, n2, he, ke, fe, xm) shared(kdiag, fload)
    do e = 1, nelem
      n1 = conn(1, e)
      n2 = conn(2, e)
      he = xnode(n2) - xnode(n1)
      xm = 0.5_dp * (xnode(n1) + xnode(n2))
      ke = youngs * area(e) / he
      fe = 0.5_dp * he * body_force(xm)
      kdiag(n1) = kdiag(n1) + ke
      kdiag(n2) = kdiag(n2) + ke
      fload(n1) = fload(n1) + fe
      fload(n2) = fload(n2) + fe
    end do
    !$omp end parallel do
  end subroutine assemble
end module bar_assembly

program bar_fem
  use bar_mesh
  use bar_assembly
  implicit none
  real(dp), allocatable :: kdiag(:), fload(:), u0(:)
  real(dp) :: total_load

  call make_mesh(2000, 10.0_dp)
  allocate(kdiag(nnode), fload(nnode), u0(nnode))

  call assemble(210.0e3_dp, kdiag, fload)

  u0 = fload / kdiag
  total_load = sum(fload)
  print '(a, f14.6)', 'total load      ', total_load
  print '(a, es14.6)', 'max diag       ', maxval(kdiag)
  print '(a, es14.6)', 'first estimate ', u0(nnode / 2)

  deallocate(kdiag, fload, u0)
  call free_mesh()
end program bar_fem
